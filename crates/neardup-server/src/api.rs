//! The JSON of the API: request bodies, responses, and their OpenAPI schemas.

use base64::Engine as _;
use neardup::decide::Signature;
use neardup_store::{Hit, Outcome, ParagraphHit, StoredDoc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// A field that may be left out, but not given as null.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A time to live: a whole number of seconds from 1 to 2^63 − 1 (JSON Schema's int64),
/// written as an integer or as a float without a fraction (`60.0`). 0 is refused: the
/// document would be expired when stored, and the answer could only mislead.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let n = serde_json::Number::deserialize(d)?;
    let max = i64::MAX as u64;
    let value = match (n.as_u64(), n.as_f64()) {
        (Some(v), _) => Some(v),
        (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f < max as f64 => Some(f as u64),
        _ => None,
    };
    match value {
        Some(v) if (1..=max).contains(&v) => Ok(Some(v)),
        _ => Err(D::Error::custom(format!(
            "{n} is not a whole number of seconds from 1 to {max}"
        ))),
    }
}

/// A document to store: its text, or the fingerprint of a text (as `GET
/// /v1/documents/{id}` returns it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutBody {
    /// The document's text.
    #[serde(default, deserialize_with = "present")]
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64 (the 248-byte signature: sketch, band
    /// keys, simhash fingerprint, text hash).
    #[serde(default, deserialize_with = "present")]
    pub fingerprint: Option<String>,
    /// Seconds until it expires (it stops matching at once, and is swept later).
    #[serde(default, deserialize_with = "seconds")]
    pub ttl: Option<u64>,
    /// Store it only if no near-duplicate is stored: the crawler's gate, atomic.
    #[serde(default)]
    pub only_if_unique: bool,
}

/// A document to check.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    /// The document's text.
    #[serde(default, deserialize_with = "present")]
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64.
    #[serde(default, deserialize_with = "present")]
    pub fingerprint: Option<String>,
    /// Also report the stored documents that share near-duplicate paragraphs with it (a
    /// store made with paragraphs; needs the text).
    #[serde(default)]
    pub paragraphs: bool,
}

/// The body of most checks, `{"text": …}` and nothing else, read without copying the
/// text when it has no escapes ([`CheckText::parse`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckText<'a> {
    #[serde(borrow)]
    pub(crate) text: std::borrow::Cow<'a, str>,
}

impl<'a> CheckText<'a> {
    /// `bytes` as a text-only check, or `None` for anything else: other fields, a null,
    /// bodies that are not JSON. A body it reads, [`CheckBody`] reads as the same text
    /// without paragraphs; the others go to that full parse, which names their errors.
    pub(crate) fn parse(bytes: &'a [u8]) -> Option<CheckText<'a>> {
        // serde reads a struct from an array of its fields too; the API takes objects.
        if !is_object(bytes) {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }
}

/// Whether `bytes` starts as a JSON object does (its first byte that is not white space
/// is `{`): bodies the schema says are objects must be, not arrays of their fields.
pub(crate) fn is_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// One document of a bulk put.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkPutItem {
    /// Its id.
    pub id: String,
    /// Its text.
    #[serde(default, deserialize_with = "present")]
    pub text: Option<String>,
    /// Instead of the text: its fingerprint, base64.
    #[serde(default, deserialize_with = "present")]
    pub fingerprint: Option<String>,
    /// Seconds until it expires.
    #[serde(default, deserialize_with = "seconds")]
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
    /// false, the ones that kept it out. At most the service's `--max-matches`; found as
    /// a check finds them (a crowded band key gives its first 64 documents only).
    pub matches: Vec<MatchJson>,
    /// Near-duplicates beyond those listed (left out when there are none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_matches: usize,
    /// True when some near-duplicates may be missing, as in a check's answer (a crowded
    /// band key; left out when every document under the text's keys was read).
    #[serde(default, skip_serializing_if = "is_false")]
    pub partial: bool,
    /// Paragraphs of the text past the first 4,096, which the store does not index, so a
    /// paragraph check does not find them (left out when there are none, and in a store
    /// without paragraphs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paragraphs_not_indexed: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// At most `max` of `hits` (most similar first) as the API writes them, and how many
/// more there were.
pub fn capped(mut hits: Vec<Hit>, max: usize) -> (Vec<MatchJson>, usize) {
    let more = hits.len().saturating_sub(max);
    hits.truncate(max);
    (hits.into_iter().map(MatchJson::from).collect(), more)
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
    /// Stored near-duplicates of the whole document, most similar first; at most the
    /// service's `--max-matches`. Of the stored documents sharing one band key with the
    /// text, only the first 64 (oldest) of each part of the index are compared: where
    /// more than 64 share one (a template stored many times), near-duplicates among the
    /// rest are found only through other band keys, and may be missing here (`partial`).
    pub matches: Vec<MatchJson>,
    /// Near-duplicates beyond those listed, among those compared (left out when there
    /// are none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_matches: usize,
    /// True when some near-duplicates may be missing from `matches` and `more_matches`:
    /// more than 64 stored documents share a band key with the text, and only the first
    /// 64 of them were compared (left out when all were).
    #[serde(default, skip_serializing_if = "is_false")]
    pub partial: bool,
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
    /// "ok"; "failing" once the store cannot write (the service is then stopping).
    pub status: String,
    /// Documents stored.
    pub documents: usize,
    /// Why the store failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PutResponse {
    /// The response of a put's outcome, listing at most `max_matches` matches, for a
    /// document of which `not_indexed` paragraphs are past those a store indexes
    /// ([`Prepared::paragraphs_not_indexed`](neardup_store::Prepared::paragraphs_not_indexed)).
    pub fn of(outcome: Outcome, max_matches: usize, not_indexed: usize) -> PutResponse {
        match outcome {
            Outcome::Put {
                inserted,
                replaced,
                matches,
                more_matches,
                partial,
            } => {
                // The store lists as many as it was told to ([`Backend::limit_matches`]);
                // capped here too, for a store that lists more.
                let (matches, more) = capped(matches, max_matches);
                PutResponse {
                    inserted,
                    replaced,
                    matches,
                    more_matches: more_matches + more,
                    partial,
                    paragraphs_not_indexed: if inserted { not_indexed } else { 0 },
                }
            }
            Outcome::Delete { .. } => PutResponse {
                inserted: false,
                replaced: false,
                matches: Vec::new(),
                more_matches: 0,
                partial: false,
                paragraphs_not_indexed: 0,
            },
        }
    }
}

/// Standard base64, decoding padded text whatever its unused trailing bits.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// A signature as the API writes it.
pub fn encode(sig: &Signature) -> String {
    BASE64.encode(sig.to_bytes())
}

/// A signature the API was given (`what` names it in the error).
pub fn decode(text: &str, what: &str) -> Result<Signature, ApiError> {
    let bytes = BASE64
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

/// The request bodies' schemas, written out: a body gives its document's `text` or its
/// `fingerprint`, exactly one (and paragraphs need the text), which derived schemas
/// cannot say.
mod schemas {
    use utoipa::openapi::schema::{
        AdditionalProperties, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type,
    };
    use utoipa::openapi::RefOr;
    use utoipa::{PartialSchema, ToSchema};

    use super::{BulkPutItem, CheckBody, PutBody};

    fn string(description: &str) -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
            .into()
    }

    fn fingerprint() -> Schema {
        // 248 bytes: 82 groups of four characters, then two bytes and one '='.
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[A-Za-z0-9+/]{331}=$"))
            .description(Some(
                "A fingerprint as GET /v1/documents/{id} gives it (base64 of 248 bytes)",
            ))
            .into()
    }

    fn ttl() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1))
            .description(Some("Seconds until the document expires (at least 1)"))
            .into()
    }

    fn flag(description: &str) -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .description(Some(description))
            .into()
    }

    /// An object of exactly these properties, `required` among them.
    fn object(properties: Vec<(&str, Schema)>, required: &[&str]) -> Schema {
        let mut b = ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)));
        for (name, schema) in properties {
            b = b.property(name, schema);
        }
        for r in required {
            b = b.required(*r);
        }
        b.into()
    }

    /// A text variant and a fingerprint variant, each with `common` properties.
    fn either(
        common: impl Fn() -> Vec<(&'static str, Schema)>,
        text_only: Vec<(&'static str, Schema)>,
        id: bool,
    ) -> RefOr<Schema> {
        let id_field = || {
            id.then(|| {
                let s = ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .description(Some("The document's id"));
                ("id", Schema::from(s))
            })
        };
        let mut text = vec![("text", string("The document's text"))];
        text.extend(id_field());
        text.extend(common());
        text.extend(text_only);
        let mut fp = vec![("fingerprint", fingerprint())];
        fp.extend(id_field());
        fp.extend(common());
        let req_text: &[&str] = if id { &["id", "text"] } else { &["text"] };
        let req_fp: &[&str] = if id {
            &["id", "fingerprint"]
        } else {
            &["fingerprint"]
        };
        OneOfBuilder::new()
            .item(object(text, req_text))
            .item(object(fp, req_fp))
            .into()
    }

    fn put_common() -> Vec<(&'static str, Schema)> {
        vec![
            ("ttl", ttl()),
            (
                "only_if_unique",
                flag("Store it only if no near-duplicate is stored"),
            ),
        ]
    }

    impl PartialSchema for PutBody {
        fn schema() -> RefOr<Schema> {
            either(put_common, Vec::new(), false)
        }
    }
    impl ToSchema for PutBody {}

    impl PartialSchema for BulkPutItem {
        fn schema() -> RefOr<Schema> {
            either(put_common, Vec::new(), true)
        }
    }
    impl ToSchema for BulkPutItem {}

    impl PartialSchema for CheckBody {
        fn schema() -> RefOr<Schema> {
            either(
                Vec::new,
                vec![(
                    "paragraphs",
                    flag("Also report documents sharing near-duplicate paragraphs (a store made with paragraphs)"),
                )],
                false,
            )
        }
    }
    impl ToSchema for CheckBody {}
}
