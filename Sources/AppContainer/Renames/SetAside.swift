import Glibc

/// The one way a file that must not be read again is put aside (ARCHITECTURE.md, "The event log"): a damaged event
/// log, import index or checkpoint, a journal entry no mover of ours wrote. `name` in `folder` is renamed to
/// `<name><suffix>` (its end cut to fit 255 bytes), never over an earlier one (`-1`, `-2`, … where that is taken),
/// its `companions` beside it (`<name><companion>` to `<aside><companion>`: SQLite's `-wal` and `-shm`), then the
/// folder is fsynced. Returns the name given (`<name><suffix>` where only companions were there); throws ENOENT when
/// nothing was.
package func setAside(_ name: FileName, in folder: CInt, suffix: String, companions: [String] = []) throws(Errno)
    -> FileName
{
    let tail = Array(suffix.utf8)
    guard let wanted = FileName(bytes: FileName.truncated(name.bytes, toAtMost: FileName.maxLength - tail.count) + tail)
    else { throw Errno.invalidArgument }
    var aside: FileName?
    do {
        aside = try ClashNaming.inbox.firstFree(for: wanted) { candidate throws(Errno) in
            try renameNoReplace(folder, name, folder, candidate)
        }
    } catch .noSuchFile {
        aside = nil
    }
    var found = aside != nil
    for companion in companions {
        let tail = Array(companion.utf8)
        guard let from = FileName(bytes: name.bytes + tail), let to = FileName(bytes: (aside ?? wanted).bytes + tail)
        else { throw Errno.nameTooLong }
        do {
            try renameNoReplace(folder, from, folder, to)
            found = true
        } catch .noSuchFile {
            continue
        }
    }
    guard found else { throw Errno.noSuchFile }
    try system_fsync(folder)
    return aside ?? wanted
}

/// `.damaged-<seconds since 1970>`: what a damaged state file is renamed with (`setAside`).
package func damagedSuffix() -> String { ".damaged-\(Timestamp.now().seconds)" }
