import EnrichmentCore
import Testing

@Suite("Body template syntax")
struct TextTemplateTests {
    let names: Set<String> = ["a", "b"]

    @Test("variables, triple braces, sections, inverted sections and comments")
    func rendering() throws {
        let template = try TextTemplate(
            "{{a}}|{{{a}}}|{{& a }}|{{#b}}B={{b}}{{/b}}{{^b}}no b{{/b}}{{! hidden }}", variables: names)
        #expect(template.render(["a": "<x&y>", "b": "1"]) == "<x&y>|<x&y>|<x&y>|B=1")
        #expect(template.render(["a": ""]) == "|||no b")
    }

    @Test(
        "errors say what is wrong",
        arguments: [
            ("{{c}}", "unknown variable 'c'; available: a, b"),
            ("{{#a}}x", "section '{{#a}}' is never closed with '{{/a}}'"),
            ("{{/a}}", "'{{/a}}' closes a section that is not open"),
            ("{{a", "tag opened at character 1 is never closed with '}}'"),
        ])
    func errors(source: String, detail: String) {
        #expect(throws: TemplateError(which: "", detail: detail)) { try TextTemplate(source, variables: names) }
    }
}
