import EnrichmentCore
import EnrichmentRuntime
import Essentials
import HTTPTypes
import LocationCore

/// An error that knows how the API answers it: its status, its stable `reason` code, its message and details.
/// Each domain error type conforms once, here; `APIError.from` and the error middleware do the rest, so a route
/// throws the domain error as it is.
protocol APIErrorConvertible: Error {
    var apiError: APIError { get }
}

extension APIError: APIErrorConvertible {
    var apiError: APIError { self }
}

extension PayloadError: APIErrorConvertible {
    var apiError: APIError {
        switch self {
        case .tooLarge, .cannotFit:
            APIError(.contentTooLarge, reason: "payload_too_large", message: description)
        default:
            APIError(.badRequest, reason: "invalid_payload", message: description)
        }
    }
}

extension OpenLocateError: APIErrorConvertible {
    var apiError: APIError { APIError(.badRequest, reason: "invalid_batch", message: description) }
}

extension PlaceFilterSyntaxError: APIErrorConvertible {
    var apiError: APIError {
        APIError(
            .badRequest, reason: "invalid_query", message: description,
            details: ["parameter": .string("query"), "position": .int(Int64(position))])
    }
}

extension POIImportError: APIErrorConvertible {
    var apiError: APIError {
        if case .tooManyRows = self {
            return APIError(.contentTooLarge, reason: "too_many_rows", message: description)
        }
        return APIError(.badRequest, reason: "invalid_import", message: description)
    }
}

extension JSONParseError: APIErrorConvertible {
    var apiError: APIError {
        APIError(
            .badRequest, reason: "invalid_json", message: "not valid JSON: \(description)",
            details: ["byte_offset": .int(Int64(offset))])
    }
}

extension DeliveryError: APIErrorConvertible {
    var apiError: APIError {
        switch self {
        case .notConfigured: APIError(.serviceUnavailable, reason: "delivery_not_configured", message: description)
        case .shuttingDown: APIError(.serviceUnavailable, reason: "shutting_down", message: description)
        }
    }
}

extension VisitRequestError: APIErrorConvertible {
    var apiError: APIError { APIError(.badRequest, reason: "invalid_visits", message: description) }
}
