//! Errors as the API answers them: a status and `{"error": {"code", "message"}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code for programs.
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
}

/// The body of an error answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's code and message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_json`, `invalid_request`, `not_found`, `unauthorized`,
    /// `too_large`, `too_many_items`, `unsupported_encoding`, `headers_too_large`,
    /// `uri_too_long`, `timeout`,
    /// `paragraphs_disabled`, `method_not_allowed`, `unavailable`, `store_unavailable`,
    /// `not_stored`, `outcome_unknown`, `memory_full`, `internal`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// A body that is not JSON.
    pub fn bad_json(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_json", message)
    }

    /// JSON that is not the request asked for: missing fields, wrong types, bad values.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }

    /// An unknown id or route.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// No token, or the wrong one.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this service needs 'Authorization: Bearer <token>'",
        )
    }

    /// A body over the limit.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the body is larger than the limit of {limit} bytes"),
        )
    }

    /// A bulk request with more items than the service takes in one.
    pub fn too_many_items(items: usize, limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_items",
            format!("{items} items is more than the limit of {limit} per request: split it"),
        )
    }

    /// A body in a `Content-Encoding` the service does not decode.
    pub fn unsupported_encoding(encoding: &str) -> ApiError {
        let shown: String = encoding.chars().take(100).collect();
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            format!("Content-Encoding \"{shown}\": send the body uncompressed (identity)"),
        )
    }

    /// A body in a transfer coding other than chunked (RFC 9112 § 6.1: 501): read as
    /// plain, a gzip-coded body would be checked as its compressed bytes.
    pub fn unsupported_transfer_coding(coding: &str) -> ApiError {
        let shown: String = coding.chars().take(100).collect();
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "unsupported_transfer_coding",
            format!("Transfer-Encoding \"{shown}\": only chunked is decoded; send the body uncompressed"),
        )
    }

    /// Header fields larger than the limit.
    pub fn headers_too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!("the header fields are larger than the limit of {limit} bytes"),
        )
    }

    /// A path longer than any route with the longest id.
    pub fn uri_too_long(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the path is longer than the limit of {limit} bytes"),
        )
    }

    /// A body not sent in time.
    pub fn body_timeout(limit: std::time::Duration) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!("the body did not arrive within {} s", limit.as_secs_f64()),
        )
    }

    /// A paragraph check of a store made without paragraphs.
    pub fn paragraphs_disabled() -> ApiError {
        ApiError::new(
            StatusCode::CONFLICT,
            "paragraphs_disabled",
            "this store does not index paragraphs: make it with `neardup serve --create --paragraphs`",
        )
    }

    /// A method the route does not take.
    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method",
        )
    }

    /// The service is stopping.
    pub fn unavailable() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the service is shutting down",
        )
    }

    /// No room to read the request's body within the body bound: the service held as
    /// many bodies as its memory for them allows all that time.
    pub fn no_room_for_bodies() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the service is holding as many request bodies as its memory for them allows \
             (--body-memory): retry later",
        )
    }

    /// A failure of the service itself (the disk, a damaged store): not the request's fault.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl ApiError {
    /// Writes refused because their documents would not fit the store's memory budget:
    /// nothing of them stored.
    pub fn memory_full(message: String) -> ApiError {
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "memory_full",
            format!("nothing of this request was stored: {message}"),
        )
    }

    /// Writes the store could not make: nothing of them stored, or (`unsure`) they may
    /// be, their log record being durable, and the next start applies them.
    pub fn write_failed(message: String, unsure: bool) -> ApiError {
        if unsure {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "outcome_unknown",
                format!("the store failed while writing, after the writes may have become durable (the next start applies them if so): {message}"),
            )
        } else {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_stored",
                format!("the store could not write; nothing of this request was stored: {message}"),
            )
        }
    }
}

impl From<neardup_store::StoreError> for ApiError {
    fn from(e: neardup_store::StoreError) -> ApiError {
        use neardup_store::StoreError::*;
        match e {
            // The disk, the database or the cluster failed: not the request's fault, and
            // not for good (a restart or the cluster's return ends it).
            Db { .. } | Io { .. } | Failed { .. } | Remote { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                e.to_string(),
            ),
            e => ApiError::internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}
