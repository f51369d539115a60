/// The schema history; never edit a shipped migration, add a new one.
///
/// `PostgresBackend.migrate` applies those not applied yet, in order, each in a transaction of its own.
enum PostgresSchema {
    static let migrations: [(String, [String])] = [
        (
            "v1-fixes",
            [
                """
                CREATE TABLE fixes (
                    device_id TEXT NOT NULL,
                    fix_time DOUBLE PRECISION NOT NULL,
                    latitude DOUBLE PRECISION NOT NULL,
                    longitude DOUBLE PRECISION NOT NULL,
                    horizontal_accuracy DOUBLE PRECISION,
                    context TEXT,
                    received_at DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (device_id, fix_time)
                )
                """
            ]
        ),
        (
            "v1-pois",
            [
                """
                CREATE TABLE pois (
                    id BIGSERIAL PRIMARY KEY,
                    store_id TEXT NOT NULL UNIQUE,
                    name TEXT NOT NULL,
                    latitude DOUBLE PRECISION NOT NULL,
                    longitude DOUBLE PRECISION NOT NULL,
                    address_lines TEXT NOT NULL DEFAULT '[]',
                    city TEXT,
                    zipcode TEXT,
                    country_code TEXT,
                    types TEXT NOT NULL DEFAULT '[]',
                    tags TEXT NOT NULL DEFAULT '[]',
                    contact TEXT,
                    user_properties TEXT,
                    updated_at DOUBLE PRECISION NOT NULL
                )
                """,
                // PostgreSQL's own spatial search without extensions: a GiST index over the coordinates as points.
                "CREATE INDEX pois_location ON pois USING gist (point(longitude, latitude))",
            ]
        ),
        (
            "v2-delivery",
            [
                """
                CREATE TABLE apns_tokens (
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    registered_at DOUBLE PRECISION NOT NULL,
                    active BOOLEAN NOT NULL DEFAULT true,
                    invalidated_at DOUBLE PRECISION,
                    reason TEXT,
                    PRIMARY KEY (device_id, token)
                )
                """,
                """
                CREATE TABLE pushes (
                    id TEXT PRIMARY KEY,
                    created_at DOUBLE PRECISION NOT NULL,
                    payload TEXT NOT NULL,
                    push_type TEXT NOT NULL,
                    priority INTEGER,
                    expiration BIGINT,
                    collapse_id TEXT,
                    topic TEXT,
                    enrich BOOLEAN NOT NULL,
                    mode TEXT
                )
                """,
                """
                CREATE TABLE push_devices (
                    push_id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    device_id TEXT NOT NULL,
                    outcome TEXT,
                    rule TEXT,
                    PRIMARY KEY (push_id, device_id)
                )
                """,
                """
                CREATE TABLE deliveries (
                    id BIGSERIAL PRIMARY KEY,
                    push_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    apns_id TEXT NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at DOUBLE PRECISION NOT NULL,
                    lease_owner TEXT,
                    lease_until DOUBLE PRECISION,
                    status INTEGER,
                    reason TEXT,
                    apns_timestamp BIGINT,
                    error TEXT,
                    outcome TEXT,
                    rule TEXT,
                    finished_at DOUBLE PRECISION
                )
                """,
                "CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending'",
                "CREATE INDEX deliveries_push ON deliveries (push_id, state)",
            ]
        ),
        (
            // Every written POI gets the next version; imports are serialized by an advisory lock, so versions
            // become visible in order and a node that has applied version v has every change up to v.
            "v3-pois-version",
            [
                "CREATE SEQUENCE pois_version",
                "ALTER TABLE pois ADD COLUMN version BIGINT NOT NULL DEFAULT nextval('pois_version')",
                "CREATE INDEX pois_by_version ON pois (version)",
            ]
        ),
        (
            // OpenLocate's other fields of a fix; visits, ZOIs, regions, region state and location events.
            "v4-location",
            [
                "ALTER TABLE fixes ADD COLUMN extras TEXT",
                """
                CREATE TABLE visits (
                    seq BIGSERIAL PRIMARY KEY,
                    device_id TEXT NOT NULL,
                    id TEXT NOT NULL,
                    arrival DOUBLE PRECISION NOT NULL,
                    departure DOUBLE PRECISION NOT NULL,
                    latitude DOUBLE PRECISION NOT NULL,
                    longitude DOUBLE PRECISION NOT NULL,
                    horizontal_accuracy DOUBLE PRECISION NOT NULL,
                    recorded_at DOUBLE PRECISION NOT NULL,
                    source TEXT NOT NULL,
                    UNIQUE (device_id, id)
                )
                """,
                "CREATE INDEX visits_by_device ON visits (device_id, seq)",
                "CREATE INDEX visits_by_recorded ON visits (recorded_at)",
                """
                CREATE TABLE zois (
                    device_id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    id TEXT NOT NULL,
                    period TEXT,
                    body TEXT NOT NULL,
                    PRIMARY KEY (device_id, position)
                )
                """,
                "CREATE TABLE regions (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
                "CREATE TABLE region_state (device_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
                """
                CREATE TABLE location_events (
                    seq BIGSERIAL PRIMARY KEY,
                    device_id TEXT NOT NULL,
                    date DOUBLE PRECISION NOT NULL,
                    body TEXT NOT NULL
                )
                """,
                "CREATE INDEX location_events_by_device ON location_events (device_id, date, seq)",
                "CREATE INDEX location_events_by_date ON location_events (date)",
            ]
        ),
        (
            // A deleted POI leaves a tombstone with the next POI version, so every node's in-memory index learns of
            // deletes as it learns of upserts (in version order).
            "v5-poi-deletions",
            [
                "CREATE TABLE poi_deletions (version BIGINT PRIMARY KEY, store_id TEXT NOT NULL)"
            ]
        ),
        (
            // A delivery taken over from a node that stopped while holding it (it may have been sent).
            "v6-takeover",
            ["ALTER TABLE deliveries ADD COLUMN taken_over BOOLEAN NOT NULL DEFAULT false"]
        ),
        (
            // Live Activity tokens: push-to-start per (device, type), update per (device, activity id).
            "v7-activities",
            [
                """
                CREATE TABLE activity_tokens (
                    device_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    key TEXT NOT NULL,
                    activity_type TEXT NOT NULL,
                    token TEXT NOT NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    frequent_pushes BOOLEAN,
                    registered_at DOUBLE PRECISION NOT NULL,
                    last_timestamp BIGINT,
                    ended_at DOUBLE PRECISION,
                    PRIMARY KEY (device_id, kind, key)
                )
                """
            ]
        ),
        (
            // Broadcast channels the service made (iOS 18).
            "v8-channels",
            [
                """
                CREATE TABLE broadcast_channels (
                    channel_id TEXT PRIMARY KEY,
                    bundle_id TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    storage_policy INTEGER NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL
                )
                """
            ]
        ),
        (
            // A Live Activity token APNs said no longer works.
            "v9-activity-invalid",
            [
                "ALTER TABLE activity_tokens ADD COLUMN invalidated_at DOUBLE PRECISION",
                "ALTER TABLE activity_tokens ADD COLUMN invalid_reason TEXT",
            ]
        ),
        (
            // Every device's last fix on a grid of 0.01° cells (LastFixCells), for audiences; filled from the fixes.
            "v10-last-fixes",
            [
                """
                CREATE TABLE last_fixes (
                    device_id TEXT PRIMARY KEY,
                    fix_time DOUBLE PRECISION NOT NULL,
                    latitude DOUBLE PRECISION NOT NULL,
                    longitude DOUBLE PRECISION NOT NULL,
                    horizontal_accuracy DOUBLE PRECISION,
                    cell BIGINT NOT NULL
                )
                """,
                // Covering: a range of cells is read from the index (see the SQLite migration).
                """
                CREATE INDEX last_fixes_by_cell ON last_fixes (cell)
                    INCLUDE (device_id, fix_time, latitude, longitude, horizontal_accuracy)
                """,
                """
                INSERT INTO last_fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, cell)
                SELECT DISTINCT ON (device_id) device_id, fix_time, latitude, longitude, horizontal_accuracy,
                       LEAST(17999, GREATEST(0, floor((latitude + 90) * 100)))::bigint * 36000
                           + LEAST(35999, GREATEST(0, floor((longitude + 180) * 100)))::bigint
                FROM fixes ORDER BY device_id, fix_time DESC
                """,
            ]
        ),
        (
            // Issue 30: scheduled deliveries, frequency caps (a device's deliveries by time), device zones and
            // tags, receipts.
            "v11-schedule",
            [
                "ALTER TABLE deliveries ADD COLUMN scheduled_at DOUBLE PRECISION",
                "ALTER TABLE pushes ADD COLUMN plan TEXT",
                "CREATE INDEX deliveries_device ON deliveries (device_id, state)",
                """
                CREATE TABLE device_profiles (
                    device_id TEXT PRIMARY KEY,
                    time_zone TEXT,
                    updated_at DOUBLE PRECISION NOT NULL
                )
                """,
                """
                CREATE TABLE device_tags (
                    tag TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    PRIMARY KEY (tag, device_id)
                )
                """,
                "CREATE INDEX device_tags_device ON device_tags (device_id)",
                """
                CREATE TABLE receipts (
                    push_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    received_at DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (push_id, device_id)
                )
                """,
            ]
        ),
        (
            // Issue 30: zones of interest on the grid of the last fixes (LastFixCells) and visits on a finer one
            // (VisitCells), for the `zoi` and `visited` audiences. A ZOI's centre comes from its body (spherical mercator, the SDK's formulas).
            "v12-audience-history",
            [
                "ALTER TABLE zois ADD COLUMN latitude DOUBLE PRECISION",
                "ALTER TABLE zois ADD COLUMN longitude DOUBLE PRECISION",
                "ALTER TABLE zois ADD COLUMN cell BIGINT",
                "ALTER TABLE visits ADD COLUMN cell BIGINT",
                """
                UPDATE visits SET cell = LEAST(179999, GREATEST(0, floor((latitude + 90) * 1000)))::bigint * 360000
                    + LEAST(359999, GREATEST(0, floor((longitude + 180) * 1000)))::bigint
                """,
                """
                UPDATE zois SET
                    latitude = ((atan(exp(((body::json->>'mean_y')::float8) / 6378137.0)) * 2 - pi() / 2) * 180)
                        / pi(),
                    longitude = ((((body::json->>'mean_x')::float8) / 6378137.0) * 180) / pi()
                """,
                """
                UPDATE zois SET cell = LEAST(17999, GREATEST(0, floor((latitude + 90) * 100)))::bigint * 36000
                    + LEAST(35999, GREATEST(0, floor((longitude + 180) * 100)))::bigint
                """,
                """
                CREATE INDEX visits_by_cell ON visits (cell, departure)
                    INCLUDE (arrival, device_id, latitude, longitude)
                """,
                "CREATE INDEX zois_by_cell ON zois (cell) INCLUDE (device_id, period, latitude, longitude)",
            ]
        ),
        (
            // Issue 30: a push's report posted to its callback URL once every delivery is final.
            "v13-push-callbacks",
            [
                "ALTER TABLE pushes ADD COLUMN callback_url TEXT",
                "ALTER TABLE pushes ADD COLUMN callback_due DOUBLE PRECISION",
                "ALTER TABLE pushes ADD COLUMN callback_attempts INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE pushes ADD COLUMN callback_outcome TEXT",
                "ALTER TABLE pushes ADD COLUMN callback_at DOUBLE PRECISION",
                "CREATE INDEX pushes_callback_due ON pushes (callback_due) WHERE callback_due IS NOT NULL",
            ]
        ),
        // Issue 47: who made a push (NULL: a request; `region_entry`), so that frequency caps count only requests.
        ("v14-push-origin", ["ALTER TABLE pushes ADD COLUMN origin TEXT"]),
        // Issue 48: pushes of any size: counts kept as deliveries change state, audiences resolved in the
        // background behind a durable cursor, pacing, cancellation at once, retention.
        ("v15-push-scale", PostgresOutbox.scaleMigration),
        // Issue 48: a delivery is written three times (enqueued, claimed, answered). The claim changes no indexed
        // column: with room left on the row's page it is a heap-only (HOT) update, which adds no index entries.
        ("v16-deliveries-fillfactor", ["ALTER TABLE deliveries SET (fillfactor = 50)"]),
    ]
}
