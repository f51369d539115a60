/// A compiled plain-text template in the Mustache syntax subset the body templates need.
///
/// `{{name}}`, `{{{name}}}` and `{{&name}}` insert a value as is (plain text: nothing is HTML-escaped);
/// `{{#name}}…{{/name}}` renders its content when the value is non-empty, `{{^name}}…{{/name}}` when it is empty;
/// `{{! comment }}` is dropped. Unknown variable names are refused when the template is compiled, so a typo is
/// reported at start-up instead of producing empty text in every notification.
public struct TextTemplate: Sendable {
    indirect enum Node: Sendable {
        case text(String)
        case variable(String)
        case section(String, inverted: Bool, [Node])
    }

    private let nodes: [Node]

    /// Compiles `source`; `variables` lists the names it may use.
    public init(_ source: String, variables: Set<String>) throws(TemplateError) {
        var parser = Parser(source: Array(source), variables: variables)
        let (nodes, closing) = try parser.parse(until: nil)
        precondition(closing == nil)
        self.nodes = nodes
    }

    /// Renders with `values`; a missing value is empty.
    public func render(_ values: [String: String]) -> String {
        render { values[$0] }
    }

    /// Renders with values computed on demand (only the variables the template uses are asked for).
    public func render(_ value: (String) -> String?) -> String {
        var output = ""
        Self.render(nodes, value, into: &output)
        return output
    }

    private static func render(_ nodes: [Node], _ value: (String) -> String?, into output: inout String) {
        for node in nodes {
            switch node {
            case .text(let text): output += text
            case .variable(let name): output += value(name) ?? ""
            case .section(let name, let inverted, let children):
                let present = !(value(name) ?? "").isEmpty
                if present != inverted { render(children, value, into: &output) }
            }
        }
    }

    private struct Parser {
        let source: [Character]
        let variables: Set<String>
        var index = 0

        func fail(_ detail: String) -> TemplateError { TemplateError(which: "", detail: detail) }

        mutating func parse(until closing: String?) throws(TemplateError) -> ([Node], String?) {
            var nodes: [Node] = []
            var text = ""
            while index < source.count {
                if source[index] == "{", index + 1 < source.count, source[index + 1] == "{" {
                    if !text.isEmpty {
                        nodes.append(.text(text))
                        text = ""
                    }
                    let tag = try readTag()
                    switch tag.first {
                    case "!": continue
                    case "#", "^":
                        let name = try checked(String(tag.dropFirst()))
                        let (children, _) = try parse(until: name)
                        nodes.append(.section(name, inverted: tag.first == "^", children))
                    case "/":
                        let name = String(tag.dropFirst()).trimmingSpaces
                        guard let closing, name == closing else {
                            throw fail("'{{/\(name)}}' closes a section that is not open")
                        }
                        return (nodes, closing)
                    case "&": nodes.append(.variable(try checked(String(tag.dropFirst()))))
                    case "{":
                        guard tag.last == "}" else { throw fail("'{{{' must be closed by '}}}'") }
                        nodes.append(.variable(try checked(String(tag.dropFirst().dropLast()))))
                    default: nodes.append(.variable(try checked(tag)))
                    }
                } else {
                    text.append(source[index])
                    index += 1
                }
            }
            if !text.isEmpty { nodes.append(.text(text)) }
            if let closing { throw fail("section '{{#\(closing)}}' is never closed with '{{/\(closing)}}'") }
            return (nodes, nil)
        }

        /// Reads `{{...}}` (or `{{{...}}}`) and returns what is inside the outer braces.
        mutating func readTag() throws(TemplateError) -> String {
            let start = index
            index += 2
            var inner = ""
            while index < source.count {
                if source[index] == "}", index + 1 < source.count, source[index + 1] == "}" {
                    if inner.first == "{", index + 2 < source.count, source[index + 2] == "}" {
                        inner.append("}")
                        index += 3
                    } else {
                        index += 2
                    }
                    return inner.trimmingSpaces
                }
                inner.append(source[index])
                index += 1
            }
            throw fail("tag opened at character \(start + 1) is never closed with '}}'")
        }

        func checked(_ raw: String) throws(TemplateError) -> String {
            let name = raw.trimmingSpaces
            guard variables.contains(name) else {
                throw fail("unknown variable '\(name)'; available: \(variables.sorted().joined(separator: ", "))")
            }
            return name
        }
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while scalars.first == " " { scalars.removeFirst() }
        while scalars.last == " " { scalars.removeLast() }
        return String(scalars)
    }
}

/// A body template that does not compile.
public struct TemplateError: Error, Equatable, Sendable, CustomStringConvertible {
    public var which: String
    public var detail: String

    public init(which: String, detail: String) {
        self.which = which
        self.detail = detail
    }

    public var description: String { "the \(which) body template is not valid: \(detail)" }
}
