import Delivery
import EnrichmentCore
import Essentials
import Foundation

extension ServiceConfiguration {
    /// Delivery: APNs credentials and endpoints, connections, retries, pushes (waits, retention, audiences, open
    /// pushes, leases), feedback, time zones, caps and callbacks.
    static let deliverySettings: [Setting<ServiceConfiguration>] = [
        Setting(
            "apns-key-file", "ENRICH_APNS_KEY_FILE", valueName: "path",
            help: "APNs token authentication: the .p8 key file (with --apns-key-id and --apns-team-id).",
            default: "unset (delivery off)", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.keyFile = $1 }),
        Setting(
            "apns-key-id", "ENRICH_APNS_KEY_ID", valueName: "id", help: "The .p8 key's 10-character key id.",
            default: "unset", allowed: "a key id", parse: nonEmpty, store: { $0.delivery.keyID = $1 }),
        Setting(
            "apns-team-id", "ENRICH_APNS_TEAM_ID", valueName: "id", help: "Your 10-character Apple team id.",
            default: "unset", allowed: "a team id", parse: nonEmpty, store: { $0.delivery.teamID = $1 }),
        Setting(
            "apns-cert", "ENRICH_APNS_CERT", valueName: "path",
            help: "APNs certificate authentication: the client certificate (PEM), with --apns-cert-key.",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.certificateFile = $1 }),
        Setting(
            "apns-cert-key", "ENRICH_APNS_CERT_KEY", valueName: "path", help: "The private key (PEM) of --apns-cert.",
            default: "unset", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.certificateKeyFile = $1 }),
        Setting(
            "apns-p12", "ENRICH_APNS_P12", valueName: "path",
            help: "APNs certificate authentication from a .p12 (password in ENRICH_APNS_P12_PASSWORD).",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.p12File = $1 }),
        Setting(
            "apns-p12-password", "ENRICH_APNS_P12_PASSWORD", valueName: "password",
            help: "Password of the .p12.", default: "unset", allowed: "a password", secret: true, parse: { $0 },
            store: { $0.delivery.p12Password = Secret($1) }),
        Setting(
            "apns-sandbox-url", "ENRICH_APNS_SANDBOX_URL", valueName: "url",
            help: "Where sandbox registrations are sent (the mock's https://127.0.0.1:PORT in tests).",
            default: defaults.delivery.sandboxURL, allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.sandboxURL = $1 }),
        Setting(
            "apns-production-url", "ENRICH_APNS_PRODUCTION_URL", valueName: "url",
            help: "Where production registrations are sent.", default: defaults.delivery.productionURL,
            allowed: "an https:// base URL", parse: httpsURL, store: { $0.delivery.productionURL = $1 }),
        Setting(
            "apns-channels-sandbox-url", "ENRICH_APNS_CHANNELS_SANDBOX_URL", valueName: "url",
            help: "Apple's channel management API for sandbox (broadcast channels, iOS 18).",
            default: "Apple's management host; the sandbox push host when ENRICH_APNS_SANDBOX_URL is set",
            allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.channelsSandboxURL = $1 }),
        Setting(
            "apns-channels-production-url", "ENRICH_APNS_CHANNELS_PRODUCTION_URL", valueName: "url",
            help: "Apple's channel management API for production.",
            default: "Apple's management host; the production push host when ENRICH_APNS_PRODUCTION_URL is set",
            allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.channelsProductionURL = $1 }),
        Setting(
            "apns-broadcast-sandbox-url", "ENRICH_APNS_BROADCAST_SANDBOX_URL", valueName: "url",
            help: "Where sandbox broadcasts go (Apple's examples use https://api-broadcast.sandbox.push.apple.com).",
            default: "the sandbox push host (ENRICH_APNS_SANDBOX_URL)", allowed: "an https:// base URL",
            parse: httpsURL,
            store: { $0.delivery.broadcastSandboxURL = $1 }),
        Setting(
            "apns-broadcast-production-url", "ENRICH_APNS_BROADCAST_PRODUCTION_URL", valueName: "url",
            help: "Where production broadcasts go (Apple's examples use https://api-broadcast.push.apple.com).",
            default: "the production push host (ENRICH_APNS_PRODUCTION_URL)", allowed: "an https:// base URL",
            parse: httpsURL,
            store: { $0.delivery.broadcastProductionURL = $1 }),
        Setting(
            "apns-ca", "ENRICH_APNS_CA", valueName: "path", help: "Extra CA certificate (PEM) to trust for APNs.",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.caFile = $1 }),
        Setting(
            "fcm-service-account-file", "ENRICH_FCM_SERVICE_ACCOUNT_FILE", valueName: "path",
            help: "FCM HTTP v1 for Android registrations: the Firebase service-account key file (JSON).",
            default: "unset (no Android delivery for the default app)", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.fcmServiceAccountFile = $1 }),
        Setting(
            "fcm-url", "ENRICH_FCM_URL", valueName: "url",
            help: "Where FCM messages are sent (a local FCM's https://127.0.0.1:PORT in tests and demos).",
            default: defaults.delivery.fcmURL, allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.fcmURL = $1 }),
        Setting(
            "fcm-ca", "ENRICH_FCM_CA", valueName: "path", help: "Extra CA certificate (PEM) to trust for FCM.",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.fcmCAFile = $1 }),
        Setting(
            "apns-connections", "ENRICH_APNS_CONNECTIONS", valueName: "count",
            help: "HTTP/2 connections per APNs environment.", default: "\(defaults.delivery.connections)",
            allowed: "an integer 1-64", parse: integer(1...64), store: { $0.delivery.connections = $1 }),
        Setting(
            "apns-event-loops", "ENRICH_APNS_EVENT_LOOPS", valueName: "count",
            help: "Event loops (threads) the APNs connections are spread over; 0 is one per core.",
            default: "\(defaults.delivery.eventLoops)", allowed: "an integer 0-64", parse: integer(0...64),
            store: { $0.delivery.eventLoops = $1 }),
        Setting(
            "apns-ping-interval", "ENRICH_APNS_PING_INTERVAL", valueName: "seconds",
            help: "Silence after which an APNs connection sends a PING (keeps it open through NATs and proves it).",
            default: "\(defaults.delivery.pingInterval)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.pingInterval = $1 }),
        Setting(
            "apns-ping-timeout", "ENRICH_APNS_PING_TIMEOUT", valueName: "seconds",
            help: "A PING unanswered this long closes the connection; its pushes go again on another.",
            default: "\(defaults.delivery.pingTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.pingTimeout = $1 }),
        Setting(
            "apns-concurrency", "ENRICH_APNS_CONCURRENCY", valueName: "count",
            help: "Deliveries in flight per lane (2 lanes), claimed in two batches of half this.",
            default: "\(defaults.delivery.concurrency)",
            allowed: "an integer 1-10000", parse: integer(1...10_000), store: { $0.delivery.concurrency = $1 }),
        Setting(
            "apns-attempts", "ENRICH_APNS_ATTEMPTS", valueName: "count",
            help: "Attempts per delivery (429, 5xx and lost connections are retried; permanent reasons never).",
            default: "\(defaults.delivery.attempts)", allowed: "an integer 1-50", parse: integer(1...50),
            store: { $0.delivery.attempts = $1 }),
        Setting(
            "apns-retry-delay", "ENRICH_APNS_RETRY_DELAY", valueName: "seconds",
            help: "Delay before the second attempt; doubled for each further one.",
            default: "\(defaults.delivery.retryDelay)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.retryDelay = $1 }),
        Setting(
            "apns-probe-interval", "ENRICH_APNS_PROBE_INTERVAL", valueName: "seconds",
            help:
                "While APNs is unreachable, the longest pause between two probes (from ENRICH_APNS_RETRY_DELAY, doubled, with jitter).",
            default: "\(defaults.delivery.probeInterval)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.probeInterval = $1 }),
        Setting(
            "delivery-max-age", "ENRICH_DELIVERY_MAX_AGE", valueName: "seconds",
            help:
                "How long a push without apns-expiration may wait for APNs (an outage) before its deliveries end expired.",
            default: "\(defaults.delivery.maximumAge)", allowed: "seconds > 0 and at most 2592000 (30 days)",
            parse: seconds(2_592_000), store: { $0.delivery.maximumAge = $1 }),
        Setting(
            "apns-timeout", "ENRICH_APNS_TIMEOUT", valueName: "seconds", help: "Longest wait for one APNs answer.",
            default: "\(defaults.delivery.requestTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.requestTimeout = $1 }),
        Setting(
            "push-wait-timeout", "ENRICH_PUSH_WAIT_TIMEOUT", valueName: "seconds",
            help:
                "Longest a \"wait\": true push request waits before answering 202 with its push id (and a GET /v1/push/{id}?wait= before answering its progress).",
            default: "\(defaults.delivery.waitTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.waitTimeout = $1 }),
        Setting(
            "push-retention", "ENRICH_PUSH_RETENTION", valueName: "seconds",
            help:
                "How long a finished push (its deliveries, devices and receipts) is kept after it was made; then it is deleted, in small batches.",
            default: "\(defaults.delivery.retention)", allowed: "seconds > 0 and at most 315360000 (10 years)",
            parse: seconds(315_360_000), store: { $0.delivery.retention = $1 }),
        Setting(
            "max-push-audience", "ENRICH_MAX_PUSH_AUDIENCE", valueName: "devices",
            help: "Most devices one push may reach (an audience, or the devices of an open push).",
            default: "\(defaults.delivery.maximumAudience)", allowed: "an integer from 1 to 100000000",
            parse: integer(1...100_000_000), store: { $0.delivery.maximumAudience = $1 }),
        Setting(
            "resolve-chunk", "ENRICH_RESOLVE_CHUNK", valueName: "devices",
            help:
                "Devices an audience's background resolution commits per transaction (with their deliveries and its cursor).",
            default: "\(defaults.delivery.resolveChunk)", allowed: "an integer from 100 to 100000",
            parse: integer(100...100_000), store: { $0.delivery.resolveChunk = $1 }),
        Setting(
            "open-push-idle", "ENRICH_OPEN_PUSH_IDLE", valueName: "seconds",
            help:
                "How long an open push (\"open\": true, devices added by POST /v1/push/{id}/devices) stays open with no device added; then it closes itself and is done once its deliveries are final.",
            default: "\(defaults.delivery.openPushIdle)", allowed: "seconds > 0 and at most 604800 (7 days)",
            parse: seconds(604_800), store: { $0.delivery.openPushIdle = $1 }),
        Setting(
            "delivery-lease", "ENRICH_DELIVERY_LEASE", valueName: "seconds",
            help: "How long a node's claim on a delivery lasts; a dead node's claims are sent by another after it.",
            default: "\(defaults.delivery.lease)", allowed: "seconds > 0 and at most 3600", parse: seconds(3_600),
            store: { $0.delivery.lease = $1 }),
        Setting(
            "feedback-url", "ENRICH_FEEDBACK_URL", valueName: "url",
            help: "Webhook that gets a JSON POST for each token deactivation.", default: "unset",
            allowed: "an http(s) URL", parse: httpURL, store: { $0.delivery.feedbackURL = $1 }),
        Setting(
            "default-time-zone", "ENRICH_DEFAULT_TIME_ZONE", valueName: "zone",
            help: "The default app's time zone for devices without one (local_time, quiet hours).",
            default: "unset", allowed: "an IANA zone name such as Europe/Paris",
            parse: { ZoneClock.zone(named: trimmed($0)) != nil ? trimmed($0) : nil },
            store: { $0.delivery.defaultTimeZone = $1 }),
        Setting(
            "frequency-cap", "ENRICH_FREQUENCY_CAP", valueName: "max/seconds",
            help: "The default app's frequency cap: at most MAX pushes per device within SECONDS (e.g. 3/86400).",
            default: "unset (not capped)", allowed: "MAX/SECONDS, MAX 1 to 1000, SECONDS 60 to 31536000",
            parse: frequencyCap, store: { $0.delivery.frequencyCap = $1 }),
        Setting(
            "push-callback-hosts", "ENRICH_PUSH_CALLBACK_HOSTS", valueName: "hosts",
            help: "Hosts a push's callback_url may name (its report is posted there once every delivery is final).",
            default: "unset (no callbacks)", allowed: "comma-separated host names or IP addresses",
            parse: hostList, store: { $0.delivery.callbackHosts = $1 }),
        Setting(
            "push-callback-secret", "ENRICH_PUSH_CALLBACK_SECRET", valueName: "secret",
            help: "Key of the HMAC-SHA256 signature each push callback carries (Enrich-Signature).",
            default: "unset (unsigned)", allowed: "a non-empty key of at least 16 characters", secret: true,
            parse: { $0.count >= 16 ? $0 : nil }, store: { $0.delivery.callbackSecret = Secret($1) }),
    ]
}
