import Foundation

/// The C library's `pow(x, y)`, called for real in every build: §2 of docs/LOCATION-RULES.md computes each of its
/// `pow`s with this (FIGMM.swift, ZOIPolygon.swift), never with `pow` and a literal exponent.
///
/// Why it is written this way. The SDK's bits are the C library's `pow` (§0: `pow(x, 2)` is not `x * x`). An
/// optimised build (`swift build -c release`) did not call it: LLVM's library-call simplifier rewrites a call
/// `pow(x, 2.0)` whose exponent is the constant 2 into the multiplication `x * x`, which it takes to be the same
/// number. It is not always: the multiplication is correctly rounded, glibc's `pow` is within about 0.52 ulp, so the
/// two differ by one ulp for about one input in a thousand. A debug build calls `pow` and matched the SDK; a release
/// build differed wherever such an input came up. Found with Tests/Fixtures/location/vectors (docs/TESTING.md):
/// - student-nyc-56d, visit v017: 1 − w = 0.7999841426564946, and `pow(1 − w, 2)` (the update's k1 and D1, §2.6
///   steps 8 and 16) is 0.6399746285018468 in glibc but 0.6399746285018467 as `(1 − w) * (1 − w)`. From there the det and C of
///   the zones drift (1e-11 and 8e-10 relative after 196 visits), and A and the priors in their last bits.
/// - pow-det: a new zone with accuracy 36.4 m has det = `pow(pow(72.8, 2), 2)` (§2.5): 28088304.025599994 in glibc,
///   28088304.02559999 as 5299.839999999999 squared.
/// The release object code had no call to `pow` left but the two `pow(σ, −2)`; every `pow(·, 2)` of FIGMM.swift and
/// ZOIPolygon.swift had become a multiplication.
///
/// `@_optimize(none)` makes this function `optnone` (and so `noinline`) for LLVM, and `@inline(never)` keeps Swift's
/// own inliner out: the call site's constant exponent never reaches the `pow` call inside, so no optimisation level
/// can turn it into a multiplication, and every build computes the C library's bits. The cost is one direct call
/// per `pow`.
@_optimize(none) @inline(never)
func libcPow(_ x: Double, _ y: Double) -> Double {
    pow(x, y)
}
