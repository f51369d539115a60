import EnrichmentCore
import Foundation
import GRDB
import LocationCore

/// The SQLite schema's history (the migrations `SQLiteDatabase` runs at open), as `PostgresSchema` is PostgreSQL's.
extension SQLiteDatabase {
    /// Schema history; never edit a registered migration, add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-fixes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE fixes (
                        device_id TEXT NOT NULL,
                        fix_time REAL NOT NULL,
                        latitude REAL NOT NULL,
                        longitude REAL NOT NULL,
                        horizontal_accuracy REAL,
                        context TEXT,
                        received_at REAL NOT NULL,
                        PRIMARY KEY (device_id, fix_time)
                    ) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("v1-pois") { db in
            try db.execute(
                sql: """
                    CREATE TABLE pois (
                        id INTEGER PRIMARY KEY,
                        store_id TEXT NOT NULL UNIQUE,
                        name TEXT NOT NULL,
                        latitude REAL NOT NULL,
                        longitude REAL NOT NULL,
                        address_lines TEXT NOT NULL DEFAULT '[]',
                        city TEXT,
                        zipcode TEXT,
                        country_code TEXT,
                        types TEXT NOT NULL DEFAULT '[]',
                        tags TEXT NOT NULL DEFAULT '[]',
                        contact TEXT,
                        user_properties TEXT,
                        updated_at REAL NOT NULL
                    );
                    CREATE VIRTUAL TABLE poi_rtree USING rtree(id, min_lat, max_lat, min_lng, max_lng);
                    CREATE TRIGGER pois_rtree_insert AFTER INSERT ON pois BEGIN
                        INSERT INTO poi_rtree VALUES (new.id, new.latitude, new.latitude, new.longitude, new.longitude);
                    END;
                    CREATE TRIGGER pois_rtree_update AFTER UPDATE OF latitude, longitude ON pois BEGIN
                        UPDATE poi_rtree SET min_lat = new.latitude, max_lat = new.latitude,
                            min_lng = new.longitude, max_lng = new.longitude WHERE id = new.id;
                    END;
                    CREATE TRIGGER pois_rtree_delete AFTER DELETE ON pois BEGIN
                        DELETE FROM poi_rtree WHERE id = old.id;
                    END;
                    """)
        }
        migrator.registerMigration("v2-delivery") { db in
            try db.execute(
                sql: """
                    CREATE TABLE apns_tokens (
                        device_id TEXT NOT NULL,
                        token TEXT NOT NULL,
                        topic TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        registered_at REAL NOT NULL,
                        active INTEGER NOT NULL DEFAULT 1,
                        invalidated_at REAL,
                        reason TEXT,
                        PRIMARY KEY (device_id, token)
                    ) WITHOUT ROWID;
                    CREATE TABLE pushes (
                        id TEXT PRIMARY KEY,
                        created_at REAL NOT NULL,
                        payload TEXT NOT NULL,
                        push_type TEXT NOT NULL,
                        priority INTEGER,
                        expiration INTEGER,
                        collapse_id TEXT,
                        topic TEXT,
                        enrich INTEGER NOT NULL,
                        mode TEXT
                    );
                    CREATE TABLE push_devices (
                        push_id TEXT NOT NULL,
                        position INTEGER NOT NULL,
                        device_id TEXT NOT NULL,
                        outcome TEXT,
                        rule TEXT,
                        PRIMARY KEY (push_id, device_id)
                    ) WITHOUT ROWID;
                    CREATE TABLE deliveries (
                        id INTEGER PRIMARY KEY,
                        push_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        token TEXT NOT NULL,
                        topic TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        apns_id TEXT NOT NULL,
                        state TEXT NOT NULL DEFAULT 'pending',
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at REAL NOT NULL,
                        lease_owner TEXT,
                        lease_until REAL,
                        status INTEGER,
                        reason TEXT,
                        apns_timestamp INTEGER,
                        error TEXT,
                        outcome TEXT,
                        rule TEXT,
                        finished_at REAL
                    );
                    CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending';
                    CREATE INDEX deliveries_push ON deliveries (push_id, state);
                    """)
        }
        migrator.registerMigration("v3-location") { db in
            // OpenLocate's other fields of a fix (a JSON object); visits, ZOIs, regions, region state, events.
            try db.execute(
                sql: """
                    ALTER TABLE fixes ADD COLUMN extras TEXT;
                    CREATE TABLE visits (
                        seq INTEGER PRIMARY KEY,
                        device_id TEXT NOT NULL,
                        id TEXT NOT NULL,
                        arrival REAL NOT NULL,
                        departure REAL NOT NULL,
                        latitude REAL NOT NULL,
                        longitude REAL NOT NULL,
                        horizontal_accuracy REAL NOT NULL,
                        recorded_at REAL NOT NULL,
                        source TEXT NOT NULL,
                        UNIQUE (device_id, id)
                    );
                    CREATE INDEX visits_by_device ON visits (device_id, seq);
                    CREATE INDEX visits_by_recorded ON visits (recorded_at);
                    CREATE TABLE zois (
                        device_id TEXT NOT NULL,
                        position INTEGER NOT NULL,
                        id TEXT NOT NULL,
                        period TEXT,
                        body TEXT NOT NULL,
                        PRIMARY KEY (device_id, position)
                    ) WITHOUT ROWID;
                    CREATE TABLE regions (
                        id TEXT PRIMARY KEY,
                        body TEXT NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE region_state (
                        device_id TEXT PRIMARY KEY,
                        body TEXT NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE location_events (
                        seq INTEGER PRIMARY KEY,
                        device_id TEXT NOT NULL,
                        date REAL NOT NULL,
                        body TEXT NOT NULL
                    );
                    CREATE INDEX location_events_by_device ON location_events (device_id, date, seq);
                    CREATE INDEX location_events_by_date ON location_events (date);
                    """)
        }
        // A delivery taken over from a process that stopped while holding it (it may have been sent).
        migrator.registerMigration("v4-takeover") { db in
            try db.execute(sql: "ALTER TABLE deliveries ADD COLUMN taken_over BOOLEAN NOT NULL DEFAULT 0")
        }
        // Live Activity tokens: push-to-start per (device, type), update per (device, activity id).
        migrator.registerMigration("v5-activities") { db in
            try db.execute(
                sql: """
                    CREATE TABLE activity_tokens (
                        device_id TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        key TEXT NOT NULL,
                        activity_type TEXT NOT NULL,
                        token TEXT NOT NULL,
                        topic TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        frequent_pushes INTEGER,
                        registered_at REAL NOT NULL,
                        last_timestamp INTEGER,
                        ended_at REAL,
                        PRIMARY KEY (device_id, kind, key)
                    ) WITHOUT ROWID
                    """)
        }
        // A Live Activity token APNs said no longer works.
        migrator.registerMigration("v7-activity-invalid") { db in
            try db.execute(
                sql: """
                    ALTER TABLE activity_tokens ADD COLUMN invalidated_at REAL;
                    ALTER TABLE activity_tokens ADD COLUMN invalid_reason TEXT;
                    """)
        }
        // Broadcast channels the service made (iOS 18).
        migrator.registerMigration("v6-channels") { db in
            try db.execute(
                sql: """
                    CREATE TABLE broadcast_channels (
                        channel_id TEXT PRIMARY KEY,
                        bundle_id TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        storage_policy INTEGER NOT NULL,
                        created_at REAL NOT NULL
                    ) WITHOUT ROWID
                    """)
        }
        // Every device's last fix on a grid of 0.01° cells (LastFixCells), for audiences; filled from the fixes. The
        // cell index covers every column a `near` reads: a range of cells is read from the index alone, in order,
        // not row by row from the table (a profile showed the per-row table lookups as most of the time).
        migrator.registerMigration("v8-last-fixes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE last_fixes (
                        device_id TEXT PRIMARY KEY,
                        fix_time REAL NOT NULL,
                        latitude REAL NOT NULL,
                        longitude REAL NOT NULL,
                        horizontal_accuracy REAL,
                        cell INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX last_fixes_by_cell
                        ON last_fixes (cell, device_id, fix_time, latitude, longitude, horizontal_accuracy);
                    INSERT INTO last_fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, cell)
                    SELECT device_id, fix_time, latitude, longitude, horizontal_accuracy,
                           min(17999, max(0, CAST((latitude + 90) * 100 AS INTEGER))) * 36000
                               + min(35999, max(0, CAST((longitude + 180) * 100 AS INTEGER)))
                    FROM fixes f
                    WHERE fix_time = (SELECT max(fix_time) FROM fixes g WHERE g.device_id = f.device_id);
                    """)
        }
        // Issue 30: scheduled deliveries, frequency caps (a device's deliveries by time), device zones and tags,
        // receipts.
        migrator.registerMigration("v9-schedule") { db in
            try db.execute(
                sql: """
                    ALTER TABLE deliveries ADD COLUMN scheduled_at REAL;
                    ALTER TABLE pushes ADD COLUMN plan TEXT;
                    CREATE INDEX deliveries_device ON deliveries (device_id, state);
                    CREATE TABLE device_profiles (
                        device_id TEXT PRIMARY KEY,
                        time_zone TEXT,
                        updated_at REAL NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE device_tags (
                        tag TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        PRIMARY KEY (tag, device_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX device_tags_device ON device_tags (device_id);
                    CREATE TABLE receipts (
                        push_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        received_at REAL NOT NULL,
                        PRIMARY KEY (push_id, device_id)
                    ) WITHOUT ROWID;
                    """)
        }
        // Issue 30: zones of interest on the grid of the last fixes (LastFixCells) and visits on a finer one
        // (VisitCells), for the `zoi` and `visited` audiences; each index covers every column its audience reads.
        migrator.registerMigration("v10-audience-history") { db in
            try db.execute(
                sql: """
                    ALTER TABLE zois ADD COLUMN latitude REAL;
                    ALTER TABLE zois ADD COLUMN longitude REAL;
                    ALTER TABLE zois ADD COLUMN cell INTEGER;
                    ALTER TABLE visits ADD COLUMN cell INTEGER;
                    UPDATE visits SET cell = min(179999, max(0, CAST((latitude + 90) * 1000 AS INTEGER))) * 360000
                                           + min(359999, max(0, CAST((longitude + 180) * 1000 AS INTEGER)));
                    CREATE INDEX visits_by_cell ON visits (cell, departure, arrival, device_id, latitude, longitude);
                    """)
            // A ZOI's centre is in its body (spherical mercator): computed here as the store computes it, 10,000
            // rows at a time (a large database is not read into memory whole).
            let page = try db.makeStatement(
                sql: """
                    SELECT device_id, position, body FROM zois WHERE (device_id, position) > (?, ?)
                    ORDER BY device_id, position LIMIT 10000
                    """)
            let update = try db.makeStatement(
                sql: "UPDATE zois SET latitude = ?, longitude = ?, cell = ? WHERE device_id = ? AND position = ?")
            var after: (String, Int) = ("", -1)
            while true {
                let rows = try Row.fetchAll(page, arguments: [after.0, after.1])
                guard let last = rows.last else { break }
                for row in rows {
                    let zoi = try LocationCodec.zoi(row[2])
                    try update.execute(arguments: [
                        zoi.latitude, zoi.longitude,
                        LastFixCells.cell(latitude: zoi.latitude, longitude: zoi.longitude), row[0], row[1],
                    ])
                }
                after = (last[0], last[1])
            }
            try db.execute(sql: "CREATE INDEX zois_by_cell ON zois (cell, device_id, period, latitude, longitude)")
        }
        // Issue 30: a push's report posted to its callback URL once every delivery is final.
        migrator.registerMigration("v11-push-callbacks") { db in
            try db.execute(
                sql: """
                    ALTER TABLE pushes ADD COLUMN callback_url TEXT;
                    ALTER TABLE pushes ADD COLUMN callback_due REAL;
                    ALTER TABLE pushes ADD COLUMN callback_attempts INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE pushes ADD COLUMN callback_outcome TEXT;
                    ALTER TABLE pushes ADD COLUMN callback_at REAL;
                    CREATE INDEX pushes_callback_due ON pushes (callback_due) WHERE callback_due IS NOT NULL;
                    """)
        }
        // Issue 25: a delivery's answer changes its state; the device's index no longer holds it, so an answer does
        // not rewrite that index (the push's keeps it: a push's pending count and its callback's check read the
        // index alone). The index names the push instead: a receipt finds its delivery without reading the
        // device's history, and a frequency cap reads the device's deliveries as before.
        migrator.registerMigration("v12-device-index") { db in
            try db.execute(
                sql: """
                    DROP INDEX deliveries_device;
                    CREATE INDEX deliveries_device ON deliveries (device_id, push_id);
                    """)
        }
        // Issue 47: who made a push (NULL: a request; `region_entry`), so that frequency caps count only requests.
        migrator.registerMigration("v13-push-origin") { db in
            try db.execute(sql: "ALTER TABLE pushes ADD COLUMN origin TEXT")
        }
        // Issue 48: pushes of any size. A push's figures are counts kept as its deliveries change state
        // (`push_counts`); an audience is resolved in the background, chunk by chunk, behind a durable cursor; a push
        // may be paced, cancelled at once, and is deleted after the retention period.
        migrator.registerMigration("v14-push-scale") { db in
            try db.execute(sql: SQLiteOutbox.scaleMigration)
        }
        return migrator
    }
}
