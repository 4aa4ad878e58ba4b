//! An HTTP answer (status, content type, headers, body), and graphite-web's answer to an
//! error.

use crate::Error;

/// An HTTP answer: status, content type, extra headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// Other headers graphite-web sends (`Pragma`, `Cache-Control`, `Expires`).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// The answer of a request's handling: its own, or [`Answer::error`]'s.
    pub(crate) fn of(result: crate::Result<Answer>) -> Answer {
        result.unwrap_or_else(|e| Answer::error(&e))
    }

    /// graphite-web's answer to an error: a 400 `text/html` body with the message (its
    /// `HttpResponseBadRequest`); a store failure is logged and answered with a 500 that
    /// does not show it.
    pub fn error(error: &Error) -> Answer {
        match error.status() {
            400 => Answer::new(400, "text/html; charset=utf-8", error.message()),
            status => {
                tracing::error!(error = %error, "graphite request failed");
                Answer::new(
                    status,
                    "text/html; charset=utf-8",
                    "The server failed to read the data for this request.",
                )
            }
        }
    }
}
