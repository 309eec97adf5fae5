import FoundationEssentials

/// `error.localizedDescription` is the message a person can act on, not Swift's generic "The operation could
/// not be completed".
extension ContainerError: LocalizedError {
    /// The message, as Foundation's `localizedDescription` shows it.
    public var errorDescription: String? { message }
}
