extension Inbox {
    /// The package's version, the one place it is written: `inbox --version` prints it (ARCHITECTURE.md,
    /// "The command line").
    public static let version = "0.1.0"
}
