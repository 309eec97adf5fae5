import AppContainer
import CArchive

/// libarchive's functions, typed by their prototypes (`CArchive`'s `shim.h`), resolved when the first backup or
/// restore needs them: libarchive brings ICU, libxml2 and libstdc++, about 2.6 ms of every start that links it, and
/// `inbox import` (once a message, from an MTA) never uses it (ARCHITECTURE.md, "Start-up and memory").
struct ArchiveFunctions: Sendable {
    let entryCopyHardlink: inbox_archive_entry_copy_hardlink
    let entryCopyPathname: inbox_archive_entry_copy_pathname
    let entryCopySymlink: inbox_archive_entry_copy_symlink
    let entryFiletype: inbox_archive_entry_filetype
    let entryFree: inbox_archive_entry_free
    let entryHardlink: inbox_archive_entry_hardlink
    let entryHardlinkUtf8: inbox_archive_entry_hardlink_utf8
    let entryNew: inbox_archive_entry_new
    let entryPathname: inbox_archive_entry_pathname
    let entryPathnameUtf8: inbox_archive_entry_pathname_utf8
    let entryPerm: inbox_archive_entry_perm
    let entrySetFiletype: inbox_archive_entry_set_filetype
    let entrySetGid: inbox_archive_entry_set_gid
    let entrySetMtime: inbox_archive_entry_set_mtime
    let entrySetPerm: inbox_archive_entry_set_perm
    let entrySetSize: inbox_archive_entry_set_size
    let entrySetUid: inbox_archive_entry_set_uid
    let entrySymlink: inbox_archive_entry_symlink
    let entrySymlinkUtf8: inbox_archive_entry_symlink_utf8
    let errno: inbox_archive_errno
    let errorString: inbox_archive_error_string
    let readDataBlock: inbox_archive_read_data_block
    let readFree: inbox_archive_read_free
    let readHeaderPosition: inbox_archive_read_header_position
    let readNew: inbox_archive_read_new
    let readNextHeader: inbox_archive_read_next_header
    let readOpenFd: inbox_archive_read_open_fd
    let readSupportFormatTar: inbox_archive_read_support_format_tar
    let writeClose: inbox_archive_write_close
    let writeData: inbox_archive_write_data
    let writeDataBlock: inbox_archive_write_data_block
    let writeDiskNew: inbox_archive_write_disk_new
    let writeDiskSetOptions: inbox_archive_write_disk_set_options
    let writeFinishEntry: inbox_archive_write_finish_entry
    let writeFree: inbox_archive_write_free
    let writeHeader: inbox_archive_write_header
    let writeNew: inbox_archive_write_new
    let writeOpenFd: inbox_archive_write_open_fd
    let writeSetFormatPax: inbox_archive_write_set_format_pax

    static let loaded = Result { () throws(ContainerError) in
        let library = try LazyLibrary("libarchive.so.13")
        return ArchiveFunctions(
            entryCopyHardlink: try library.function(
                "archive_entry_copy_hardlink", as: inbox_archive_entry_copy_hardlink.self),
            entryCopyPathname: try library.function(
                "archive_entry_copy_pathname", as: inbox_archive_entry_copy_pathname.self),
            entryCopySymlink: try library.function(
                "archive_entry_copy_symlink", as: inbox_archive_entry_copy_symlink.self),
            entryFiletype: try library.function("archive_entry_filetype", as: inbox_archive_entry_filetype.self),
            entryFree: try library.function("archive_entry_free", as: inbox_archive_entry_free.self),
            entryHardlink: try library.function("archive_entry_hardlink", as: inbox_archive_entry_hardlink.self),
            entryHardlinkUtf8: try library.function(
                "archive_entry_hardlink_utf8", as: inbox_archive_entry_hardlink_utf8.self),
            entryNew: try library.function("archive_entry_new", as: inbox_archive_entry_new.self),
            entryPathname: try library.function("archive_entry_pathname", as: inbox_archive_entry_pathname.self),
            entryPathnameUtf8: try library.function(
                "archive_entry_pathname_utf8", as: inbox_archive_entry_pathname_utf8.self),
            entryPerm: try library.function("archive_entry_perm", as: inbox_archive_entry_perm.self),
            entrySetFiletype: try library.function(
                "archive_entry_set_filetype", as: inbox_archive_entry_set_filetype.self),
            entrySetGid: try library.function("archive_entry_set_gid", as: inbox_archive_entry_set_gid.self),
            entrySetMtime: try library.function("archive_entry_set_mtime", as: inbox_archive_entry_set_mtime.self),
            entrySetPerm: try library.function("archive_entry_set_perm", as: inbox_archive_entry_set_perm.self),
            entrySetSize: try library.function("archive_entry_set_size", as: inbox_archive_entry_set_size.self),
            entrySetUid: try library.function("archive_entry_set_uid", as: inbox_archive_entry_set_uid.self),
            entrySymlink: try library.function("archive_entry_symlink", as: inbox_archive_entry_symlink.self),
            entrySymlinkUtf8: try library.function(
                "archive_entry_symlink_utf8", as: inbox_archive_entry_symlink_utf8.self),
            errno: try library.function("archive_errno", as: inbox_archive_errno.self),
            errorString: try library.function("archive_error_string", as: inbox_archive_error_string.self),
            readDataBlock: try library.function("archive_read_data_block", as: inbox_archive_read_data_block.self),
            readFree: try library.function("archive_read_free", as: inbox_archive_read_free.self),
            readHeaderPosition: try library.function(
                "archive_read_header_position", as: inbox_archive_read_header_position.self),
            readNew: try library.function("archive_read_new", as: inbox_archive_read_new.self),
            readNextHeader: try library.function("archive_read_next_header", as: inbox_archive_read_next_header.self),
            readOpenFd: try library.function("archive_read_open_fd", as: inbox_archive_read_open_fd.self),
            readSupportFormatTar: try library.function(
                "archive_read_support_format_tar", as: inbox_archive_read_support_format_tar.self),
            writeClose: try library.function("archive_write_close", as: inbox_archive_write_close.self),
            writeData: try library.function("archive_write_data", as: inbox_archive_write_data.self),
            writeDataBlock: try library.function("archive_write_data_block", as: inbox_archive_write_data_block.self),
            writeDiskNew: try library.function("archive_write_disk_new", as: inbox_archive_write_disk_new.self),
            writeDiskSetOptions: try library.function(
                "archive_write_disk_set_options", as: inbox_archive_write_disk_set_options.self),
            writeFinishEntry: try library.function(
                "archive_write_finish_entry", as: inbox_archive_write_finish_entry.self),
            writeFree: try library.function("archive_write_free", as: inbox_archive_write_free.self),
            writeHeader: try library.function("archive_write_header", as: inbox_archive_write_header.self),
            writeNew: try library.function("archive_write_new", as: inbox_archive_write_new.self),
            writeOpenFd: try library.function("archive_write_open_fd", as: inbox_archive_write_open_fd.self),
            writeSetFormatPax: try library.function(
                "archive_write_set_format_pax", as: inbox_archive_write_set_format_pax.self))
    }
}
