import AppContainer
import InboxKit

struct VerifyCommand: Command {
    static let name = "verify"
    static let abstract = "Re-hash the bundle against its seal; name each modified, added or missing resource."
    static let usage = "verify"
    static let options: [(String, String)] = []
    static let spec = Arguments.Spec()

    /// Prints `verify: the seal of NAME.app holds (N resources)`; for a broken seal, one line per problem
    /// (`modified: PATH`, `added: PATH`, `missing: PATH`, `unreadable: _CodeSignature/CodeResources`), then
    /// fails with exit status 65.
    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let bundle = AppBundle(container: try Container.open(at: containerPath))
        let report = try bundle.verify()
        switch report.state {
        case .notSealed:
            Output.line(names: Array("verify: \(bundle.name) holds no seal and nothing to verify".utf8))
        case .intact:
            let count = report.resources == 1 ? "1 resource" : "\(report.resources) resources"
            Output.line(names: Array("verify: the seal of \(bundle.name) holds (\(count))".utf8))
        case .broken:
            for problem in report.problems {
                Output.line(names: Array("\(problem.kind.rawValue): \(problem.path)".utf8))
            }
            let count = report.problems.count == 1 ? "1 problem" : "\(report.problems.count) problems"
            throw ContainerError(
                .badData,
                "the seal of \(bundle.name) is broken (\(count) above): the app must not run; install the bundle into a new container"
            )
        }
    }
}
