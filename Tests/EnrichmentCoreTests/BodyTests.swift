import EnrichmentCore
import Foundation
import Testing

@Suite("Body strings")
struct BodyTests {
    let user = Coordinate(latitude: 43.6, longitude: 3.88)
    let match = PlaceMatch(
        poi: POI(
            storeId: "s1", name: "Gare Saint-Roch", coordinate: Coordinate(latitude: 43.6048, longitude: 3.8807),
            address: POI.Address(city: "Montpellier", zipcode: "34000")),
        distance: 135.28682936)

    @Test("woosmap, places and map: city, zip code and distance")
    func placesAndMap() {
        #expect(
            WoosmapBody.body(user: user, poi: match, mapConfigured: true)
                == "City = Montpellier \nZipCode = 34000 \nDistance = 135.28682936")
    }

    @Test("woosmap, places only: location lines first")
    func placesOnly() {
        #expect(
            WoosmapBody.body(user: user, poi: match, mapConfigured: false)
                == "myLatitude = 43.600000 \nmyLongitude = 3.880000 \nCity = Montpellier \nZipCode = 34000 \nDistance = 135.28682936"
        )
    }

    @Test("woosmap, map only or neither: location lines, %f with 6 decimals")
    func locationOnly() {
        #expect(
            WoosmapBody.location(Coordinate(latitude: -33.8567844, longitude: 151.213108))
                == "myLatitude = -33.856784 \nmyLongitude = 151.213108")
    }

    @Test("woosmap distance is printed as Swift prints a Double")
    func distanceFormat() {
        var whole = match
        whole.distance = 100
        #expect(WoosmapBody.body(user: user, poi: whole, mapConfigured: true).hasSuffix("Distance = 100.0"))
    }

    @Test("woosmap fixed strings")
    func fixedStrings() {
        #expect(WoosmapBody.noTimestamp == "No timestamp")
        #expect(WoosmapBody.outOfTime == "OUT OF TIME")
        #expect(WoosmapBody.searchError(status: 403) == "Error Search API 403")
    }

    @Test("default template: name, readable distance, city")
    func defaultTemplate() throws {
        let template = try BodyTemplate()
        #expect(template.render(poi: match, user: user) == "Gare Saint-Roch is 140 m away in Montpellier")
        var noCity = match
        noCity.poi.address.city = nil
        #expect(template.render(poi: noCity, user: user) == "Gare Saint-Roch is 140 m away")
        #expect(template.render(location: user) == "You are near 43.60000, 3.88000")
    }

    @Test("templates are plain text: no HTML escaping")
    func noEscaping() throws {
        var named = match
        named.poi.name = "Fish & Chips <Deluxe>"
        #expect(try BodyTemplate(poi: "{{name}}").render(poi: named, user: user) == "Fish & Chips <Deluxe>")
    }

    @Test("a broken template is refused")
    func brokenTemplate() {
        #expect(throws: TemplateError.self) { try BodyTemplate(poi: "{{#name}} unclosed") }
    }

    @Test(
        "readable distances",
        arguments: [
            (4.4, "4 m"), (99.4, "99 m"), (99.6, "100 m"), (135.3, "140 m"), (994, "990 m"), (995, "1.0 km"),
            (1234, "1.2 km"), (9_949, "9.9 km"), (12_400, "12 km"),
        ])
    func readable(metres: Double, expected: String) {
        #expect(BodyTemplate.readableDistance(metres) == expected)
    }
}

@Suite("Same name: a city and a place name compared as words")
struct SameNameTests {
    @Test(
        "agrees with Foundation's case- and accent-blind comparison, on ASCII and beyond",
        arguments: [
            ("Paris", "paris", true), ("PARIS", "Paris", true), ("Paris", "Pari", false), ("Paris", "Parix", false),
            ("Saint-Roch", "saint-roch", true), ("Saint-Roch", "Saint Roch", false), ("", "", true), ("a", "", false),
            ("Zürich", "Zurich", true), ("zürich", "ZURICH", true), ("Montréal", "Montreal", true),
            ("Köln", "Koeln", false), ("[", "{", false), ("@", "`", false), ("İstanbul", "istanbul", true),
            ("Musée du Louvre", "Paris", false), ("Musée", "MUSEE", true), ("e\u{301}", "é", true),
            ("Cafe\u{301} de Flore", "Café de Flore", true), ("Paris", "Paris\u{301}", true),
            ("Paris ", "Paris", false), ("Zürich", "Zurich ", false),
        ])
    func agreesWithFoundation(_ a: String, _ b: String, _ expected: Bool) {
        #expect(BodyTemplate.sameName(a, b) == expected)
        #expect(BodyTemplate.sameName(b, a) == expected)
        let foundation = a.compare(b, options: [.caseInsensitive, .diacriticInsensitive]) == .orderedSame
        #expect(foundation == expected, "the reference itself")
    }
}
