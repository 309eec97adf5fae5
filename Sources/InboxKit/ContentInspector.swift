// STUB until the content inspector lands (helper branch `content`): same API.
import AppContainer

public struct Inspection: Sendable, Equatable {
    public let sha256: String
    public let type: String
    public let mime: String
}

final class ContentInspector {
    init() throws(ContainerError) {}
    func inspect(_ fd: CInt) throws(ContainerError) -> Inspection {
        Inspection(sha256: "", type: "other", mime: "application/octet-stream")
    }
}
