import Hummingbird
import Synchronization

/// The service's routes and their methods, so a known path asked with another method gets 405 and `Allow`
/// (Hummingbird's router answers 404 for it).
final class RouteTable: Sendable {
    private let routes = Mutex<[(segments: [Substring], methods: Set<String>)]>([])
    /// Every route with its method and the permission it needs (the scoped-key tests walk it).
    private let registered = Mutex<[(path: String, method: HTTPRequest.Method, permission: AppScope.Permission)]>([])

    /// The routes as registered: path pattern, method, permission.
    var all: [(path: String, method: HTTPRequest.Method, permission: AppScope.Permission)] {
        registered.withLock { $0 }
    }

    /// Records `method` for a path pattern (`:name` segments match any one segment).
    func add(_ path: String, method: HTTPRequest.Method, permission: AppScope.Permission = .read) {
        registered.withLock { $0.append((path, method, permission)) }
        let segments = Self.segments(path)
        routes.withLock { routes in
            if let index = routes.firstIndex(where: { $0.segments == segments }) {
                routes[index].methods.insert(method.rawValue)
            } else {
                routes.append((segments, [method.rawValue]))
            }
        }
    }

    /// The methods a path accepts (HEAD with GET), sorted; empty when no route has this path.
    func allowedMethods(for path: String) -> [String] {
        let requested = Self.segments(path)
        var methods = Set<String>()
        routes.withLock { routes in
            for route in routes
            where route.segments.count == requested.count
                && zip(route.segments, requested).allSatisfy({ $0.hasPrefix(":") || $0 == $1 })
            {
                methods.formUnion(route.methods)
            }
        }
        if methods.contains("GET") { methods.insert("HEAD") }
        return methods.sorted()
    }

    /// Path segments as the router sees them: empty segments (`//`, a trailing `/`) do not count.
    static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    /// `path` as the router matches it: `/` before each segment, empty segments left out (`/health/` and
    /// `//health` are `/health`). A path already in that form (every request a client sends) is returned as it is.
    static func normalized(_ path: String) -> String {
        let utf8 = path.utf8
        let slash = UInt8(ascii: "/")
        var previous: UInt8 = 0
        var plain = utf8.first == slash && (utf8.count == 1 || utf8.last != slash)
        if plain {
            for byte in utf8 {
                if byte == slash, previous == slash {
                    plain = false
                    break
                }
                previous = byte
            }
        }
        return plain ? path : "/" + segments(path).joined(separator: "/")
    }
}

/// Registers handlers on the router under a path prefix and records them in the route table.
struct RouteRecorder {
    let router: Router<ServiceContext>
    let table: RouteTable
    var prefix = ""

    /// A recorder for routes under `path`.
    func group(_ path: String) -> RouteRecorder {
        RouteRecorder(router: router, table: table, prefix: prefix + path)
    }

    /// Adds a handler for `method` on `path` (relative to the prefix), run only for a key whose scope allows
    /// `permission` (by default: GET reads, every other method writes).
    func on(
        _ path: String, method: HTTPRequest.Method, permission: AppScope.Permission? = nil,
        use handler: @Sendable @escaping (Request, ServiceContext) async throws -> Response
    ) {
        let full = path.isEmpty ? prefix : prefix + (path.hasPrefix("/") ? path : "/" + path)
        let needed = permission ?? (method == .get ? .read : .write)
        table.add(full, method: method, permission: needed)
        router.on(RouterPath(full), method: method) { request, context in
            let scope = AppScope.current
            guard scope.allows(needed) else { throw scope.forbidden(needed) }
            return try await handler(request, context)
        }
    }

    func get(
        _ path: String, permission: AppScope.Permission? = nil,
        use handler: @Sendable @escaping (Request, ServiceContext) async throws -> Response
    ) {
        on(path, method: .get, permission: permission, use: handler)
    }

    func post(
        _ path: String, permission: AppScope.Permission? = nil,
        use handler: @Sendable @escaping (Request, ServiceContext) async throws -> Response
    ) {
        on(path, method: .post, permission: permission, use: handler)
    }

    func put(
        _ path: String, permission: AppScope.Permission? = nil,
        use handler: @Sendable @escaping (Request, ServiceContext) async throws -> Response
    ) {
        on(path, method: .put, permission: permission, use: handler)
    }

    func delete(
        _ path: String, permission: AppScope.Permission? = nil,
        use handler: @Sendable @escaping (Request, ServiceContext) async throws -> Response
    ) {
        on(path, method: .delete, permission: permission, use: handler)
    }
}
