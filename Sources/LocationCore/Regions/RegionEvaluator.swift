public import EnrichmentCore
import Essentials

/// Enter/exit of regions as a device's fixes arrive (docs/LOCATION-RULES.md §4.3-4.5), on the fix time.
public struct RegionEvaluator: Sendable {
    /// The shortest time between two logs of one region; a change sooner is ignored (§4.5 rule 3).
    public static let minimumInterval = 5.0

    public var settings: LocationSettings

    public init(settings: LocationSettings) { self.settings = settings }

    /// One fix with the Wi-Fi network it reports.
    public struct Observation: Sendable {
        public var fix: LocationFix
        public var wifiSSID: String?
        public var wifiBSSID: String?
        public init(fix: LocationFix, wifiSSID: String? = nil, wifiBSSID: String? = nil) {
            self.fix = fix
            self.wifiSSID = wifiSSID
            self.wifiBSSID = wifiBSSID
        }
    }

    /// The POI region of §4.3: `poi_<store_id>_<name> - <radius> m`, with the POI's fields for its events.
    public static func poiRegion(_ match: PlaceMatch, radius: Double) -> Region {
        let poi = match.poi
        var extra: [String: JSONValue] = [
            "idstore": .string(poi.storeId), "name": .string(poi.name), "distance": .double(match.distance),
        ]
        if let city = poi.address.city { extra["city"] = .string(city) }
        if let zip = poi.address.zipcode { extra["zipCode"] = .string(zip) }
        if let country = poi.address.countryCode { extra["country_code"] = .string(country) }
        if !poi.tags.isEmpty { extra["tags"] = .array(poi.tags.map { .string($0) }) }
        if !poi.types.isEmpty { extra["types"] = .array(poi.types.map { .string($0) }) }
        if !poi.address.lines.isEmpty { extra["address"] = .string(poi.address.lines.joined(separator: ", ")) }
        return Region(
            id: poiRegionId(poi, radius: radius), latitude: poi.coordinate.latitude,
            longitude: poi.coordinate.longitude, radius: radius, policy: .circle, extra: extra)
    }

    /// The id of a POI's region.
    public static func poiRegionId(_ poi: POI, radius: Double) -> String {
        "poi_\(poi.storeId)_\(poi.name) - \(radius) m"
    }

    /// The region of a classified zone (§3.7's circle, evaluated on fixes).
    public static func zoneRegion(_ zoi: ZoneOfInterest, radius: Double) -> Region {
        Region(
            id: "zoi_\(zoi.id)", latitude: zoi.latitude, longitude: zoi.longitude, radius: radius, policy: .circle,
            extra: ["period": .string(zoi.period ?? ""), "zoi_id": .string(zoi.id)])
    }

    /// Evaluates one device's new fixes in fix-time order.
    ///
    /// - `custom(observation)`: the custom regions to evaluate for a fix (the nearest ones, and those naming the
    ///   Wi-Fi network it reports).
    /// - `customById`: every custom region, to keep evaluating the ones the device is in.
    /// - `pois(point)`: the nearest POIs of a point, for the POI regions (nil when POI regions are off).
    /// - `before`: where the device was at its fix before the first observation (nil: no such fix, or not needed);
    ///   the POI regions monitored before a fix are those of the fix before it (§4.3 as the server applies it).
    ///
    /// `state.poiRegions` keeps only the POI regions the device is inside: the monitored set is a function of the
    /// position, so a device far from every POI keeps no POI region (docs/LOCATION-RULES.md §4.3, "(ours)").
    public func evaluate(
        _ observations: [Observation], deviceId: String, state: inout DeviceRegionState, zones: [Region],
        custom: (Observation) -> [Region], customById: (String) -> Region?, pois: ((Coordinate) -> [PlaceMatch])?,
        before: Coordinate? = nil
    ) -> [LocationEvent] {
        var events: [LocationEvent] = []
        let sorted = observations.sorted { $0.fix.fixTime < $1.fix.fixTime }
        var previous = before
        for observation in sorted {
            let fix = observation.fix
            defer { previous = fix.coordinate }
            // Fixes older than what was evaluated already would replay history out of order: skipped.
            if let last = state.lastFixTime, fix.fixTime <= last { continue }
            state.lastFixTime = fix.fixTime
            // §4.3: the POI regions are those of the nearest POIs; a region that was not monitored at the fix before
            // checks "inside" at once with its own containment (no accuracy), through rule 3 (ours: no duplicate
            // enter). Only the regions that could contain the fix, or that the device has a log for, are built.
            var poiRegions: [Region] = []
            if let pois {
                let radius = settings.poiRegionRadius
                let accuracy = fix.horizontalAccuracy ?? 0
                var monitoredBefore: Set<String>?
                for match in pois(fix.coordinate) {
                    // A metre of slack: the decisions below are the region's own, on the same kernel.
                    let near = match.distance - max(accuracy, 0) < radius + 1
                    let logged = !state.logs.isEmpty && state.logs[Self.poiRegionId(match.poi, radius: radius)] != nil
                    guard near || logged else { continue }
                    let region = Self.poiRegion(match, radius: radius)
                    poiRegions.append(region)
                    guard region.centre.distance(to: fix.coordinate) <= region.radius else { continue }
                    let before =
                        monitoredBefore
                        ?? Set((previous.map { pois($0) } ?? []).map { Self.poiRegionId($0.poi, radius: radius) })
                    monitoredBefore = before
                    if !before.contains(region.id) {
                        transition(region, enter: true, at: fix.fixTime, fromPosition: false, &state, &events, deviceId)
                    }
                }
            }
            // §4.5 rule 2 over every monitored region (a handful: a linear check removes repeats).
            var monitored: [Region] = []
            monitored.reserveCapacity(settings.customRegionsPerDevice + poiRegions.count + zones.count + 2)
            func add(_ region: Region) {
                if !monitored.contains(where: { $0.id == region.id }) { monitored.append(region) }
            }
            custom(observation).forEach(add)
            for (id, log) in state.logs.sorted(by: { $0.key < $1.key })
            where log.didEnter && AppNamespace.customRegionApp(id) != nil {
                if let region = customById(id) { add(region) }
            }
            poiRegions.forEach(add)
            zones.forEach(add)
            for region in monitored {
                let inside = region.contains(fix, wifiSSID: observation.wifiSSID, wifiBSSID: observation.wifiBSSID)
                transition(region, enter: inside, at: fix.fixTime, fromPosition: true, &state, &events, deviceId)
            }
            if pois != nil { state.poiRegions = poiRegions.filter { state.logs[$0.id]?.didEnter == true } }
        }
        Self.prune(&state)
        return events
    }

    /// Drops exit logs older than the 5 s rule: rule 3 then acts as if there were none (an enter is allowed, an
    /// exit is not), so the state of a device that keeps moving past POIs stays small.
    static func prune(_ state: inout DeviceRegionState) {
        guard let now = state.lastFixTime else { return }
        state.logs = state.logs.filter { $0.value.didEnter || now - $0.value.date < minimumInterval }
    }

    /// §4.5 rule 3: log and raise an event when the state changes, not within 5 s of the last log, never a first
    /// exit.
    func transition(
        _ region: Region, enter: Bool, at time: Double, fromPosition: Bool, _ state: inout DeviceRegionState,
        _ events: inout [LocationEvent], _ deviceId: String
    ) {
        if let last = state.logs[region.id] {
            if time - last.date < Self.minimumInterval { return }
            if last.didEnter == enter { return }
        } else if !enter {
            return
        }
        state.logs[region.id] = DeviceRegionState.Log(didEnter: enter, date: time)
        let isZone = region.kind == "zoi"
        var fields = region.extra
        fields["region_id"] = .string(region.id)
        fields["latitude"] = .double(region.latitude)
        fields["longitude"] = .double(region.longitude)
        fields["radius"] = .double(region.radius)
        fields["from_position_detection"] = .bool(fromPosition)
        fields["kind"] = .string(region.kind)
        // A polygon's events say so; latitude, longitude and radius are then the circle around it (circle events
        // keep the SDK's fields alone).
        if region.polygon != nil { fields["shape"] = .string(region.shape) }
        let type = isZone ? (enter ? "zoi_enter" : "zoi_exit") : (enter ? "region_enter" : "region_exit")
        events.append(.make(type, deviceId: deviceId, date: time, fields: fields))
    }
}
