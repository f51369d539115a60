import Foundation

/// One setting, declared once: its flag, its environment variable, its value type (through `parse`), its default,
/// its help, and whether it is a secret.
///
/// A table of these is the only place a setting is described: the environment reader, the flag parser, the help
/// text and the redacted start-up summary are all derived from it. Secrets have no flag: they are read from the
/// environment only, so they never appear in `ps` output or shell history, and their values are never echoed.
public struct Setting<Root>: Sendable {
    /// The long flag without dashes (`port` for `--port`).
    public let name: String
    /// The environment variable (`ENRICH_PORT`).
    public let variable: String
    /// What the value looks like in help (`<seconds>`).
    public let valueName: String
    /// One sentence for the help.
    public let help: String
    /// The default as the help shows it.
    public let defaultValue: String
    /// Environment only, never echoed.
    public let isSecret: Bool
    /// What is allowed, for errors and help.
    public let allowed: String
    private let assign: @Sendable (inout Root, String) -> Bool

    /// A setting whose text is parsed by `parse` (nil: not allowed) and stored by `store`.
    public init<Value>(
        _ name: String, _ variable: String, valueName: String, help: String, default defaultValue: String,
        allowed: String, secret: Bool = false,
        parse: @escaping @Sendable (String) -> Value?,
        store: @escaping @Sendable (inout Root, Value) -> Void
    ) {
        self.name = name
        self.variable = variable
        self.valueName = valueName
        self.help = help
        self.defaultValue = defaultValue
        self.allowed = allowed
        self.isSecret = secret
        self.assign = { root, text in
            guard let value = parse(text) else { return false }
            store(&root, value)
            return true
        }
    }

    /// The flag as typed (`--port`).
    public var flag: String { "--\(name)" }

    /// Sets the setting from `text`; `origin` is what the user typed (flag or variable), for the error.
    public func apply(_ text: String, to root: inout Root, origin: String) throws(ConfigurationError) {
        if isSecret, text.trimmingCharacters(in: .whitespaces).isEmpty {
            // Set but empty is a mistake (an unexpanded variable, a missing file), never "no secret".
            throw ConfigurationError(
                setting: origin, value: "<empty>", allowed: "a non-empty secret; unset the variable to run without it")
        }
        guard assign(&root, text) else {
            throw ConfigurationError(
                setting: origin, value: isSecret ? "<redacted>" : text.trimmingCharacters(in: .whitespaces),
                allowed: allowed)
        }
    }
}

/// The settings of one configuration type, and the readers derived from them.
public struct SettingsTable<Root>: Sendable {
    public let settings: [Setting<Root>]

    public init(_ settings: [Setting<Root>]) {
        self.settings = settings
    }

    /// The setting read from `variable`.
    public func setting(variable: String) -> Setting<Root>? {
        settings.first { $0.variable == variable }
    }

    /// Applies every variable of the table found in `environment`; errors name the variable.
    public func apply(environment: [String: String], to root: inout Root) throws(ConfigurationError) {
        for setting in settings {
            guard let value = environment[setting.variable] else { continue }
            try setting.apply(value, to: &root, origin: setting.variable)
        }
    }

    /// Applies `--name value` and `--name=value` arguments; errors name the flag as typed.
    ///
    /// Unknown flags, a flag without a value, and secrets given as flags are refused with what to do instead.
    public func apply(arguments: [String], to root: inout Root) throws(ConfigurationError) {
        var position = 0
        while position < arguments.count {
            let argument = arguments[position]
            position += 1
            guard argument.hasPrefix("--") else {
                throw ConfigurationError(
                    setting: argument, value: "", allowed: "a --flag; see --help", problem: "unexpected argument")
            }
            let name: String
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[argument.index(argument.startIndex, offsetBy: 2)..<equals])
                value = String(argument[argument.index(after: equals)...])
            } else {
                name = String(argument.dropFirst(2))
            }
            guard let setting = settings.first(where: { $0.name == name }) else {
                let suggestion =
                    Self.closest(to: name, in: settings.map(\.name)).map { " (did you mean --\($0)?)" } ?? ""
                throw ConfigurationError(
                    setting: "--\(name)", value: "", allowed: "a known option; see --help\(suggestion)",
                    problem: "unknown option")
            }
            if setting.isSecret {
                throw ConfigurationError(
                    setting: "--\(name)", value: "",
                    allowed: "\(setting.variable) in the environment (secrets are never read from flags)",
                    problem: "not accepted as a flag")
            }
            if value == nil {
                guard position < arguments.count else {
                    throw ConfigurationError(
                        setting: setting.flag, value: "", allowed: setting.allowed, problem: "needs a value")
                }
                value = arguments[position]
                position += 1
            }
            try setting.apply(value ?? "", to: &root, origin: setting.flag)
        }
    }

    /// Help lines: each flag (or variable, for secrets) with its value, help, variable and default.
    public var helpText: String {
        settings.map { setting in
            let head =
                setting.isSecret
                ? "\(setting.variable)=<\(setting.valueName)>" : "\(setting.flag) <\(setting.valueName)>"
            let origin = setting.isSecret ? "environment only" : setting.variable
            let text = "\(setting.help) (\(origin); default: \(setting.defaultValue))"
            return "  \(head)\n" + Self.wrap(text, width: 70).map { "        " + $0 }.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// Lines of at most `width` characters, broken at spaces (help is shown on 80-column terminals, and a
    /// line that fits is not re-wrapped by the argument parser).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// The name in `names` within two edits of `name`, if one is.
    static func closest(to name: String, in names: [String]) -> String? {
        let scored = names.map { ($0, editDistance(Array(name), Array($0))) }.filter { $0.1 <= 2 }
        return scored.min { $0.1 < $1.1 }?.0
    }

    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, left) in a.enumerated() {
            var current = [i + 1]
            for (j, right) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (left == right ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// A setting with a value that is not allowed; `setting` is what the user typed (a flag or a variable).
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var setting: String
    public var value: String
    public var allowed: String
    /// What is wrong when it is not the value (an unknown flag, a missing value).
    public var problem: String?

    public init(setting: String, value: String, allowed: String, problem: String? = nil) {
        self.setting = setting
        self.value = value
        self.allowed = allowed
        self.problem = problem
    }

    public var description: String {
        if let problem { return "\(setting): \(problem): expected \(allowed)" }
        if value.isEmpty { return "\(setting) is required: expected \(allowed)" }
        return setting.hasPrefix("--")
            ? "\(setting) '\(value)' is not valid: expected \(allowed)"
            : "\(setting)='\(value)' is not valid: expected \(allowed)"
    }
}

extension SettingsTable {
    /// The help line of one setting (for a command that takes only a few of them as its own options).
    public func help(for name: String) -> String {
        guard let setting = settings.first(where: { $0.name == name }) else { return "" }
        return "\(setting.help) (\(setting.variable), default \(setting.defaultValue))"
    }
}
