/// The API's error reasons: the `error.reason` of every error answer, on every route. One vocabulary, stable
/// across versions (clients branch on it); `docs/openapi.yaml` lists the same values (a test holds the two equal).
public enum APIReason: String, Sendable, CaseIterable {
    // The request as a whole.
    /// The request is malformed: a member is missing, has the wrong type or a value outside its range.
    case invalidRequest = "invalid_request"
    /// A body member (or a nested member) that the request does not have.
    case unknownField = "unknown_field"
    /// The body is not JSON.
    case invalidJSON = "invalid_json"
    /// The body is empty where a JSON document is required.
    case emptyBody = "empty_body"
    /// The body is larger than the service accepts (413).
    case bodyTooLarge = "body_too_large"
    /// The body was declared as something other than JSON (415).
    case unsupportedMediaType = "unsupported_media_type"
    /// The request is not valid HTTP/1.1 (the connection is closed after the answer).
    case malformedRequest = "malformed_request"
    /// The request line and headers are larger than the server accepts (431).
    case headersTooLarge = "headers_too_large"
    /// No valid API key (401).
    case unauthorized
    /// The key is valid but its scope does not allow this route (403): a read-only key writing, a send-only key
    /// registering a device, an app's key on what only an admin key may do (POIs).
    case forbidden
    /// The `Enrich-App` header names no app this key can reach (404, as if it did not exist).
    case appNotFound = "app_not_found"
    /// A topic (bundle id) that is not the app's own (422).
    case topicNotOfApp = "topic_not_of_app"
    /// No such endpoint (404).
    case notFound = "not_found"
    /// The endpoint exists, not with this method (405, with `Allow`).
    case methodNotAllowed = "method_not_allowed"
    /// The server holds as many connections as it may (503).
    case tooManyConnections = "too_many_connections"
    /// The server is stopping (503).
    case shuttingDown = "shutting_down"
    /// Something failed on the server (500); the log has the details.
    case internalError = "internal_error"
    /// The database cannot be reached now, or did not answer within `ENRICH_DATABASE_TIMEOUT` (503, with
    /// `Retry-After`); nothing was acknowledged, so the request can be sent again.
    case databaseUnavailable = "database_unavailable"
    /// The places index is still loading at start-up and did not finish within the request's wait (503, with
    /// `Retry-After`).
    case placesLoading = "places_loading"
    /// The database's disk is full (507): nothing was written; free space and the service resumes by itself.
    case storageFull = "storage_full"
    /// The router answered with a status no other reason covers.
    case httpError = "http_error"

    // Members and parameters with rules of their own.
    /// A device id breaks its rule (1 to 128 visible characters).
    case invalidDeviceID = "invalid_device_id"
    /// An APNs device token is not an even number of 64 to 200 hex digits.
    case invalidToken = "invalid_token"
    /// A store id of the places API breaks its rule.
    case invalidStoreID = "invalid_store_id"
    /// A `limit` query parameter out of range.
    case invalidLimit = "invalid_limit"
    /// A places filter query that does not parse (`error.parameter`, `error.position`).
    case invalidQuery = "invalid_query"
    /// The APNs payload is not one the service can take (not an object, no `aps`...).
    case invalidPayload = "invalid_payload"
    /// The payload cannot fit APNs's limit (413).
    case payloadTooLarge = "payload_too_large"
    /// A push breaks one of Apple's rules (topic, priority, expiration, payload size...); `error.field` names it.
    case invalidPush = "invalid_push"
    /// A location batch that is not an OpenLocate batch.
    case invalidBatch = "invalid_batch"
    /// A visits report that is not one.
    case invalidVisits = "invalid_visits"
    /// A region definition that breaks a rule.
    case invalidRegion = "invalid_region"
    /// An audience that breaks a rule (`error.field` is the path of the member at fault), or one too large for a
    /// push.
    case invalidAudience = "invalid_audience"
    /// An audience that holds no device now: nothing was sent (422).
    case audienceEmpty = "audience_empty"
    /// A POI import that cannot be read.
    case invalidImport = "invalid_import"
    /// A POI import with more rows than allowed (413).
    case tooManyRows = "too_many_rows"

    // Things that do not exist (404) or cannot be done (503).
    case unknownDevice = "unknown_device"
    case unknownPOI = "unknown_poi"
    case unknownRegion = "unknown_region"
    case noFix = "no_fix"
    case pushNotFound = "push_not_found"
    /// Devices added to a push that is not open (closed, done, cancelled, or an audience push) (409).
    case pushNotOpen = "push_not_open"
    /// Devices added to an open push past ENRICH_MAX_PUSH_AUDIENCE (422).
    case pushTooLarge = "push_too_large"
    /// A receipt for a device the push was not sent to (404).
    case deviceNotInPush = "device_not_in_push"
    case tokenNotFound = "token_not_found"
    /// No push-to-start token for the activity type, or no update token for the activity (404).
    case activityNotFound = "activity_not_found"
    /// The activity ended: it takes no more updates (409).
    case activityEnded = "activity_ended"
    /// An update whose `timestamp` is not newer than one already sent for the activity (409): the phone would
    /// drop it.
    case activityUpdateNotNewer = "activity_update_not_newer"
    /// A Live Activity push whose `timestamp` is outside the staleness window (422).
    case staleActivityUpdate = "stale_activity_update"
    /// Live Activity pushes need token (.p8) authentication; the service has only a certificate (409).
    case liveActivityNeedsTokenAuth = "live_activity_needs_token_auth"
    /// APNs said the activity's token no longer works (410 Unregistered...): the app registers a new one (409).
    case activityTokenInvalid = "activity_token_invalid"
    /// No broadcast channel has this id (404).
    case channelNotFound = "channel_not_found"
    /// APNs refused a channel request or a broadcast (`error.apns_reason`, its status, a hint) (422, or 409 at
    /// the app's channel limit).
    case apnsRefused = "apns_refused"
    /// APNs could not be reached, answered 5xx or 429, or refused the service's own credential (503, with
    /// `Retry-After`).
    case apnsUnavailable = "apns_unavailable"
    /// `POST /v1/push` on a service with no APNs credentials (503).
    case deliveryNotConfigured = "delivery_not_configured"
}
