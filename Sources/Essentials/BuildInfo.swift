/// What `--version` prints for both executables.
public enum BuildInfo {
    /// The project version (semantic versioning; bumped when a release is cut).
    public static let version = "0.9.0"
}
