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
            APIError(.contentTooLarge, reason: .payloadTooLarge, message: description)
        default:
            APIError(.badRequest, reason: .invalidPayload, message: description)
        }
    }
}

extension OpenLocateError: APIErrorConvertible {
    var apiError: APIError { APIError(.badRequest, reason: .invalidBatch, message: description) }
}

extension PlaceFilterSyntaxError: APIErrorConvertible {
    var apiError: APIError {
        APIError(
            .badRequest, reason: .invalidQuery, message: description,
            details: ["parameter": .string("query"), "position": .int(Int64(position))])
    }
}

extension POIImportError: APIErrorConvertible {
    var apiError: APIError {
        if case .tooManyRows = self {
            return APIError(.contentTooLarge, reason: .tooManyRows, message: description)
        }
        return APIError(.badRequest, reason: .invalidImport, message: description)
    }
}

extension JSONParseError: APIErrorConvertible {
    var apiError: APIError {
        APIError(
            .badRequest, reason: .invalidJSON, message: "not valid JSON: \(description)",
            details: ["byte_offset": .int(Int64(offset))])
    }
}

extension DeliveryError: APIErrorConvertible {
    var apiError: APIError {
        switch self {
        case .notConfigured: APIError(.serviceUnavailable, reason: .deliveryNotConfigured, message: description)
        case .shuttingDown: APIError(.serviceUnavailable, reason: .shuttingDown, message: description)
        }
    }
}

extension VisitRequestError: APIErrorConvertible {
    var apiError: APIError { APIError(.badRequest, reason: .invalidVisits, message: description) }
}
