// What InboxKit's API uses from AppContainer (`Container`, `ContainerError`, `FileName`, `Place`, …) comes with
// `import InboxKit` alone.
@_exported import AppContainer
