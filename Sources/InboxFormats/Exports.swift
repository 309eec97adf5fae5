// What InboxFormats' API uses from InboxKit (`Inbox`, `InboxItem`, …) comes with `import InboxFormats` alone.
@_exported import InboxKit
