import Foundation
import TestSupport
import Testing

/// Every public declaration in `Sources/` has a doc comment (issue 11): a text scan of the sources, fast enough for
/// every `make test`. A declaration counts when it is public: it says `public` or `open`, or it is a member of a
/// `public extension` or a requirement of a public protocol with no access of its own, or it is a case of a public
/// enum; and every type around it is public too (an extension passes). Its doc comment is a `///` line or a
/// `/** */` block directly above it, attributes on lines of their own between them allowed.
@Suite struct DocCommentTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func everyPublicDeclarationHasADocComment() throws {
        let sources = Self.repository.appendingPathComponent("Sources")
        var files: [String] = []
        let walker = FileManager.default.enumerator(atPath: sources.path)
        while let path = walker?.nextObject() as? String {
            if path.hasSuffix(".swift") { files.append(path) }
        }
        var found = 0
        var undocumented: [String] = []
        for path in files.sorted() {
            let text = try String(contentsOfFile: sources.path + "/" + path, encoding: .utf8)
            let declarations = DocCommentScan.publicDeclarations(in: text)
            found += declarations.count
            for declaration in declarations where !declaration.documented {
                undocumented.append("Sources/\(path):\(declaration.line): \(declaration.text)")
            }
        }
        // A scan that finds nothing checks nothing: there are about 290 (PublicAPI.txt lists them).
        #expect(found > 200, "only \(found) public declarations found in \(sources.path)")
        for line in undocumented { print(line) }
        if !undocumented.isEmpty {
            Issue.record("\(undocumented.count) of \(found) public declarations have no doc comment (listed above)")
        }
    }

    /// The scan on a sample: it finds what it should, and only that.
    @Test func theScanFindsEachKindOfUndocumentedDeclaration() {
        let sample = #"""
            /// Documented.
            public struct Shown {
                public var bare: Int
                /// Documented.
                @discardableResult
                public func documented() -> Int { 1 }
                public private(set) var setter = 0
                var internalOne = 0
                func internalFunc() {
                    let text = "public func inAString()"
                    /* public func inAComment() */
                }
                public static func bareStatic() {}
                public struct Nested {}
                struct InternalNested { public var hidden: Int }
                public init() {}
            }
            struct Hidden {
                public var notReally: Int
            }
            /** Documented. */
            public enum Choice {
                case plain
                /// Documented.
                case documented
                public var name: String {
                    switch self {
                    case .plain: return """
                        public func inAMultilineString()
                        """
                    case .documented: return "d"
                    }
                }
            }
            /// Documented.
            public protocol Asked {
                func requirement()
                /// Documented.
                var documented: Int { get }
            }
            public extension Shown {
                func implicitlyPublic() {}
            }
            extension Shown {
                func internalAgain() {}
                public func open(at path: String) {}
            }
            open class Opened {}
            @available(*, deprecated) public typealias Old = Int
            """#
        let undocumented = DocCommentScan.publicDeclarations(in: sample).filter { !$0.documented }.map(\.text)
        #expect(
            undocumented == [
                "public var bare: Int",
                "public private(set) var setter = 0",
                "public static func bareStatic() {}",
                "public struct Nested {}",
                "public init() {}",
                "case plain",
                "public var name: String {",
                "func requirement()",
                "func implicitlyPublic() {}",
                "public func open(at path: String) {}",
                "open class Opened {}",
                "@available(*, deprecated) public typealias Old = Int",
            ])
    }
}

/// The text scan behind `DocCommentTests`: Swift source lexed enough to tell code from comments and strings, and
/// braces followed to know which type each declaration is in.
enum DocCommentScan {
    struct Declaration {
        let line: Int
        let text: String
        let documented: Bool
    }

    /// One line of source: its code (string literals emptied, comments dropped) and what kind of comment it holds.
    struct Line {
        var code: [UInt8] = []
        var text: String = ""
        /// Holds a doc comment (`///`, or part of a `/** */` block) and no code.
        var isDoc = false
    }

    static let declarationKeywords: Set<String> = [
        "func", "init", "deinit", "var", "let", "struct", "class", "enum", "protocol", "typealias", "subscript",
        "extension", "actor", "case", "associatedtype", "macro", "operator", "precedencegroup",
    ]
    static let typeKeywords: Set<String> = ["struct", "class", "enum", "protocol", "extension", "actor"]
    static let accessModifiers: Set<String> = ["public", "open", "package", "internal", "fileprivate", "private"]
    static let otherModifiers: Set<String> = [
        "static", "class", "final", "override", "mutating", "nonmutating", "convenience", "required", "lazy", "weak",
        "unowned", "dynamic", "indirect", "nonisolated", "consuming", "borrowing", "isolated", "optional", "prefix",
        "postfix", "infix", "distributed",
    ]

    /// What a `{` opened: a type's body (with what makes its members public) or any other block.
    enum Scope {
        case type(keyword: String, isPublic: Bool, membersPublic: Bool)
        case block
    }

    static func publicDeclarations(in source: String) -> [Declaration] {
        let lines = lex(Array(source.utf8))
        var scopes: [Scope] = []
        var pending: Scope?
        var declarations: [Declaration] = []
        for (index, line) in lines.enumerated() {
            if let parsed = parse(line.code) {
                let enclosing = scopes.last
                let isPublic: Bool
                switch enclosing {
                case .block: isPublic = false
                case .type(let keyword, let typeIsPublic, let membersPublic):
                    if !typeIsPublic && keyword != "extension" {
                        isPublic = false
                    } else if parsed.keyword == "case" {
                        isPublic = keyword == "enum"
                    } else if parsed.access == nil {
                        isPublic = membersPublic
                    } else {
                        isPublic = parsed.access == "public" || parsed.access == "open"
                    }
                case nil:
                    isPublic = parsed.access == "public" || parsed.access == "open"
                }
                // An extension needs no comment of its own: its members do.
                if isPublic && parsed.keyword != "extension" {
                    var above = index - 1
                    while above >= 0, isAttributesOnly(lines[above].code) { above -= 1 }
                    declarations.append(
                        Declaration(
                            line: index + 1, text: line.text.trimmingCharacters(in: .whitespaces),
                            documented: above >= 0 && lines[above].isDoc))
                }
                if typeKeywords.contains(parsed.keyword) {
                    let typeIsPublic = isPublic || (parsed.keyword == "extension" && enclosing == nil)
                    let membersPublic =
                        typeIsPublic
                        && (parsed.keyword == "protocol"
                            || (parsed.keyword == "extension" && parsed.access == "public"))
                    pending = .type(keyword: parsed.keyword, isPublic: typeIsPublic, membersPublic: membersPublic)
                }
            }
            for byte in line.code {
                if byte == UInt8(ascii: "{") {
                    scopes.append(pending ?? .block)
                    pending = nil
                } else if byte == UInt8(ascii: "}") {
                    _ = scopes.popLast()
                }
            }
        }
        return declarations
    }

    /// The declaration a line of code starts with: its keyword and its access modifier, if any.
    static func parse(_ code: [UInt8]) -> (keyword: String, access: String?)? {
        var position = 0
        var access: String?
        func skipSpaces() { while position < code.count, code[position] == 32 || code[position] == 9 { position += 1 } }
        func word() -> String {
            let start = position
            while position < code.count, isIdentifier(code[position]) { position += 1 }
            return String(decoding: code[start..<position], as: UTF8.self)
        }
        func skipParentheses() {
            guard position < code.count, code[position] == UInt8(ascii: "(") else { return }
            var depth = 0
            while position < code.count {
                if code[position] == UInt8(ascii: "(") { depth += 1 }
                if code[position] == UInt8(ascii: ")") { depth -= 1 }
                position += 1
                if depth == 0 { return }
            }
        }
        while true {
            skipSpaces()
            guard position < code.count else { return nil }
            if code[position] == UInt8(ascii: "@") {
                position += 1
                _ = word()
                skipParentheses()
                continue
            }
            let name = word()
            if name.isEmpty { return nil }
            let followedByParenthesis = position < code.count && code[position] == UInt8(ascii: "(")
            if accessModifiers.contains(name) && name != "open" || name == "open" && !followedByParenthesis {
                if followedByParenthesis {
                    skipParentheses()  // `private(set)`: the setter's access, not the declaration's
                } else if name == "open" {
                    // `open` is a modifier only before another modifier or a keyword.
                    let saved = position
                    skipSpaces()
                    let next = word()
                    position = saved
                    guard
                        accessModifiers.contains(next) || otherModifiers.contains(next)
                            || declarationKeywords.contains(next)
                    else { return nil }
                    access = name
                } else {
                    access = name
                }
                continue
            }
            if otherModifiers.contains(name) {
                if name == "class" {
                    // `class` is a modifier before another modifier or a keyword, else it declares a class.
                    let saved = position
                    skipSpaces()
                    let next = word()
                    position = saved
                    if !(accessModifiers.contains(next) || otherModifiers.contains(next)
                        || declarationKeywords.contains(next))
                    {
                        return ("class", access)
                    }
                }
                skipParentheses()  // `nonisolated(unsafe)`, `unowned(safe)`
                continue
            }
            return declarationKeywords.contains(name) ? (name, access) : nil
        }
    }

    /// A line that holds only attributes, such as `@discardableResult` or `@available(*, deprecated)`.
    static func isAttributesOnly(_ code: [UInt8]) -> Bool {
        var sawAttribute = false
        var position = 0
        while position < code.count {
            let byte = code[position]
            if byte == 32 || byte == 9 {
                position += 1
            } else if byte == UInt8(ascii: "@") {
                sawAttribute = true
                position += 1
                while position < code.count, isIdentifier(code[position]) { position += 1 }
                if position < code.count, code[position] == UInt8(ascii: "(") {
                    var depth = 0
                    while position < code.count {
                        if code[position] == UInt8(ascii: "(") { depth += 1 }
                        if code[position] == UInt8(ascii: ")") { depth -= 1 }
                        position += 1
                        if depth == 0 { break }
                    }
                }
            } else {
                return false
            }
        }
        return sawAttribute
    }

    static func isIdentifier(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "_") || (byte >= 48 && byte <= 57) || (byte | 0x20 >= 97 && byte | 0x20 <= 122)
    }

    /// What the lexer is in: code (with the parenthesis depth of a string interpolation it is in), a block comment,
    /// or a string literal (with its number of `#` and whether it is a multi-line one).
    enum Mode {
        case code(interpolationDepth: Int)
        case blockComment(depth: Int, isDoc: Bool)
        case string(hashes: Int, multiline: Bool)
    }

    static func lex(_ bytes: [UInt8]) -> [Line] {
        var lines: [Line] = []
        var line = Line()
        var lineStart = 0
        var modes: [Mode] = [.code(interpolationDepth: 0)]
        var index = 0
        func at(_ offset: Int, _ text: String) -> Bool {
            var position = index + offset
            for byte in text.utf8 {
                guard position < bytes.count, bytes[position] == byte else { return false }
                position += 1
            }
            return true
        }
        func codeIsBlank() -> Bool { line.code.allSatisfy { $0 == 32 || $0 == 9 } }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 10 {
                if case .blockComment(_, true) = modes.last, codeIsBlank() { line.isDoc = true }
                line.text = String(decoding: bytes[lineStart..<index], as: UTF8.self)
                lines.append(line)
                line = Line()
                index += 1
                lineStart = index
                continue
            }
            switch modes[modes.count - 1] {
            case .code(let depth):
                if at(0, "//") {
                    if at(0, "///") && codeIsBlank() { line.isDoc = true }
                    while index < bytes.count, bytes[index] != 10 { index += 1 }
                    continue
                }
                if at(0, "/*") {
                    modes.append(.blockComment(depth: 1, isDoc: at(0, "/**") && !at(0, "/**/")))
                    index += 2
                    continue
                }
                var hashes = 0
                while at(hashes, "#") { hashes += 1 }
                if at(hashes, "\"") {
                    let multiline = at(hashes, "\"\"\"")
                    line.code.append(UInt8(ascii: "\""))
                    index += hashes + (multiline ? 3 : 1)
                    modes.append(.string(hashes: hashes, multiline: multiline))
                    continue
                }
                if depth > 0 {
                    if byte == UInt8(ascii: "(") {
                        modes[modes.count - 1] = .code(interpolationDepth: depth + 1)
                    } else if byte == UInt8(ascii: ")") {
                        if depth == 1 {
                            modes.removeLast()
                        } else {
                            modes[modes.count - 1] = .code(interpolationDepth: depth - 1)
                        }
                        index += 1
                        continue
                    }
                }
                line.code.append(byte)
                index += hashes > 0 ? hashes : 1
                if hashes > 0 { line.code.append(contentsOf: Array(repeating: UInt8(ascii: "#"), count: hashes - 1)) }
            case .blockComment(let depth, let isDoc):
                if isDoc && codeIsBlank() { line.isDoc = true }
                if at(0, "/*") {
                    modes[modes.count - 1] = .blockComment(depth: depth + 1, isDoc: isDoc)
                    index += 2
                } else if at(0, "*/") {
                    if depth == 1 {
                        modes.removeLast()
                    } else {
                        modes[modes.count - 1] = .blockComment(depth: depth - 1, isDoc: isDoc)
                    }
                    index += 2
                } else {
                    index += 1
                }
            case .string(let hashes, let multiline):
                let closing = (multiline ? "\"\"\"" : "\"") + String(repeating: "#", count: hashes)
                if byte == UInt8(ascii: "\\") {
                    let marker = String(repeating: "#", count: hashes)
                    if at(1, marker + "(") {
                        index += 2 + hashes
                        modes.append(.code(interpolationDepth: 1))
                    } else {
                        // An escaped character, but never the newline of a continued line: lines are counted.
                        index += hashes == 0 && !at(1, "\n") ? 2 : 1
                    }
                } else if at(0, closing) {
                    line.code.append(UInt8(ascii: "\""))
                    index += closing.utf8.count
                    modes.removeLast()
                } else {
                    index += 1
                }
            }
        }
        line.text = String(decoding: bytes[lineStart..<index], as: UTF8.self)
        lines.append(line)
        return lines
    }
}
