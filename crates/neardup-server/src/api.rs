//! The JSON of the API: request bodies, responses, and their OpenAPI schemas.

use base64::Engine as _;
use neardup::decide::Signature;
use neardup_store::{Hit, Outcome, ParagraphHit, StoredDoc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// A document to store: its text, or the fingerprint of a text (as `GET
/// /v1/documents/{id}` returns it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutBody {
    /// The document's text.
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64 (the 248-byte signature: sketch, band
    /// keys, simhash fingerprint, text hash).
    pub fingerprint: Option<String>,
    /// Seconds until it expires (it stops matching at once, and is swept later).
    pub ttl: Option<u64>,
    /// Store it only if no near-duplicate is stored: the crawler's gate, atomic.
    #[serde(default)]
    pub only_if_unique: bool,
}

/// A document to check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    /// The document's text.
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64.
    pub fingerprint: Option<String>,
    /// Also report the stored documents that share near-duplicate paragraphs with it (a
    /// store made with paragraphs; needs the text).
    #[serde(default)]
    pub paragraphs: bool,
}

/// One document of a bulk put.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkPutItem {
    /// Its id.
    pub id: String,
    /// Its text.
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64.
    pub fingerprint: Option<String>,
    /// Seconds until it expires.
    pub ttl: Option<u64>,
    /// Store it only if no near-duplicate is stored.
    #[serde(default)]
    pub only_if_unique: bool,
}

/// A stored near-duplicate.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MatchJson {
    /// Its id.
    pub id: String,
    /// Estimated Jaccard similarity of the word 5-shingle sets (1 for the same text).
    pub similarity: f32,
    /// Hamming distance of the 256-bit simhash fingerprints.
    pub distance: u32,
}

impl From<Hit> for MatchJson {
    fn from(h: Hit) -> MatchJson {
        MatchJson {
            id: h.id,
            similarity: (h.similarity * 1000.0).round() / 1000.0,
            distance: h.distance,
        }
    }
}

/// What a put did.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct PutResponse {
    /// The document is stored now (durably: after the fsync that covers it).
    pub inserted: bool,
    /// It replaced a document stored under its id.
    pub replaced: bool,
    /// Stored near-duplicates, most similar first: with `only_if_unique` and `inserted`
    /// false, the ones that kept it out.
    pub matches: Vec<MatchJson>,
}

/// What one document of a bulk put did.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct BulkPutResult {
    /// Its id.
    pub id: String,
    /// What the put did.
    #[serde(flatten)]
    pub result: PutResponse,
}

/// A paragraph of the query and the stored paragraph it is a near-duplicate of.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct SpanJson {
    /// The query paragraph's byte span, `[start, end)`.
    pub query: [u32; 2],
    /// The stored paragraph's byte span in its document.
    pub stored: [u32; 2],
    /// Their estimated Jaccard similarity.
    pub similarity: f32,
}

/// A stored document sharing near-duplicate paragraphs with the query.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ParagraphJson {
    /// Its id.
    pub id: String,
    /// The share of the query's paragraph text in the paragraphs it shares.
    pub coverage: f32,
    /// The shared paragraphs.
    pub spans: Vec<SpanJson>,
}

impl From<ParagraphHit> for ParagraphJson {
    fn from(h: ParagraphHit) -> ParagraphJson {
        ParagraphJson {
            id: h.id,
            coverage: (h.coverage * 1000.0).round() / 1000.0,
            spans: h
                .spans
                .into_iter()
                .map(|s| SpanJson {
                    query: [s.query.start, s.query.end],
                    stored: [s.stored.start, s.stored.end],
                    similarity: (s.similarity * 1000.0).round() / 1000.0,
                })
                .collect(),
        }
    }
}

/// What a check found.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct CheckResponse {
    /// Stored near-duplicates of the whole document, most similar first.
    pub matches: Vec<MatchJson>,
    /// With `paragraphs`: stored documents sharing near-duplicate paragraphs, by coverage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paragraphs: Option<Vec<ParagraphJson>>,
}

/// A stored document.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct DocumentResponse {
    /// Its id.
    pub id: String,
    /// Its fingerprint, base64: give it back as `fingerprint` to check or store it.
    pub fingerprint: String,
    /// When it expires, in Unix seconds.
    pub expires: Option<u64>,
    /// Paragraphs indexed.
    pub paragraphs: usize,
}

impl From<StoredDoc> for DocumentResponse {
    fn from(d: StoredDoc) -> DocumentResponse {
        DocumentResponse {
            id: d.id,
            fingerprint: encode(&d.signature),
            expires: d.expires,
            paragraphs: d.paragraphs,
        }
    }
}

/// What a delete did.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct DeleteResponse {
    /// The id was stored, and is no more.
    pub removed: bool,
}

/// The service's state.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct Health {
    /// "ok".
    pub status: String,
    /// Documents stored.
    pub documents: usize,
}

impl PutResponse {
    /// The response of a put's outcome.
    pub fn of(outcome: Outcome) -> PutResponse {
        match outcome {
            Outcome::Put {
                inserted,
                replaced,
                matches,
            } => PutResponse {
                inserted,
                replaced,
                matches: matches.into_iter().map(MatchJson::from).collect(),
            },
            Outcome::Delete { .. } => PutResponse {
                inserted: false,
                replaced: false,
                matches: Vec::new(),
            },
        }
    }
}

/// A signature as the API writes it.
pub fn encode(sig: &Signature) -> String {
    base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())
}

/// A signature the API was given (`what` names it in the error).
pub fn decode(text: &str, what: &str) -> Result<Signature, ApiError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| ApiError::invalid(format!("{what}: not base64: {e}")))?;
    let bytes: &[u8; Signature::BYTES] = bytes.as_slice().try_into().map_err(|_| {
        ApiError::invalid(format!(
            "{what}: {} bytes, a fingerprint has {}",
            bytes.len(),
            Signature::BYTES
        ))
    })?;
    Ok(Signature::from_bytes(bytes))
}
