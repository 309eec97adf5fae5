import InboxCommands

// `inbox`: every command but those that need InboxFormats, which it hands to `inbox-formats` (ARCHITECTURE.md,
// "Two executables").
runInboxAndExit()
