/// What becomes of an arrival: what a handler (the library's, or an `--exec` command's first word) asks, or
/// `WatchOptions.onArrival`.
public enum Disposition: String, Sendable {
    /// Leave it in the Inbox; move it into Documents (under a clash name on a clash); delete it.
    case keep, move, delete
}
