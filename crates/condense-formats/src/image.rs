//! An image's description in each provider's shape. condense keeps an image as the wire gave it
//! ([`condense_core::Image::source`]); a writer of another format (`condense recall --format`,
//! a tool output of blocks written for another API) must give it in its own shape, or the
//! provider refuses the block: Anthropic's `source` (`{"type": "base64", "media_type",
//! "data"}` or `{"type": "url", "url"}`), Chat Completions' `image_url` object (`{"url"}`, a
//! URL or a `data:` URL), the Responses API's `image_url` string. Nothing is decoded: base64
//! data moves between a `data:` URL and Anthropic's fields as it is.

use serde_json::{Value, json};

/// What an image's description points at.
enum Picture<'a> {
    /// Inline bytes, base64, with their media type.
    Data { media_type: &'a str, data: &'a str },
    /// A URL the provider fetches.
    Url(&'a str),
}

fn picture(source: &Value) -> Option<Picture<'_>> {
    let url = match source {
        Value::Object(fields) => match fields.get("type").and_then(Value::as_str) {
            Some("base64") => {
                return Some(Picture::Data {
                    media_type: fields.get("media_type")?.as_str()?,
                    data: fields.get("data")?.as_str()?,
                });
            }
            Some("url") => fields.get("url")?.as_str()?,
            _ => fields.get("url")?.as_str()?,
        },
        Value::String(url) => url,
        _ => return None,
    };
    Some(
        match url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
        {
            Some((media_type, data)) => Picture::Data { media_type, data },
            None => Picture::Url(url),
        },
    )
}

/// Whether `source` is already Anthropic's shape.
fn is_anthropic(source: &Value) -> bool {
    matches!(
        source.get("type").and_then(Value::as_str),
        Some("base64" | "url")
    )
}

/// `source` as Anthropic's `source`.
pub(crate) fn anthropic_source(source: &Value) -> Value {
    if is_anthropic(source) {
        return source.clone();
    }
    match picture(source) {
        Some(Picture::Data { media_type, data }) => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        Some(Picture::Url(url)) => json!({"type": "url", "url": url}),
        None => source.clone(),
    }
}

/// `source` as Chat Completions' `image_url` object.
pub(crate) fn openai_image_url(source: &Value) -> Value {
    if !is_anthropic(source) {
        return source.clone();
    }
    match picture(source) {
        Some(Picture::Data { media_type, data }) => {
            json!({"url": format!("data:{media_type};base64,{data}")})
        }
        Some(Picture::Url(url)) => json!({"url": url}),
        None => source.clone(),
    }
}

/// `source` as the Responses API's `image_url` string.
pub(crate) fn responses_image_url(source: &Value) -> Value {
    if source.is_string() {
        return source.clone();
    }
    match picture(source) {
        Some(Picture::Data { media_type, data }) => {
            Value::String(format!("data:{media_type};base64,{data}"))
        }
        Some(Picture::Url(url)) => Value::String(url.to_owned()),
        None => source.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_moves_between_the_three_shapes_and_back() {
        let anthropic = json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0K"});
        let chat = openai_image_url(&anthropic);
        assert_eq!(chat, json!({"url": "data:image/png;base64,iVBORw0K"}));
        let responses = responses_image_url(&anthropic);
        assert_eq!(responses, json!("data:image/png;base64,iVBORw0K"));
        assert_eq!(anthropic_source(&chat), anthropic);
        assert_eq!(anthropic_source(&responses), anthropic);
        assert_eq!(responses_image_url(&chat), responses);
        let linked = json!({"url": "https://example.com/a.png", "detail": "high"});
        assert_eq!(
            anthropic_source(&linked),
            json!({"type": "url", "url": "https://example.com/a.png"})
        );
        // Each format's own shape is left as it came.
        assert_eq!(openai_image_url(&linked), linked);
        assert_eq!(anthropic_source(&anthropic), anthropic);
        assert_eq!(responses_image_url(&responses), responses);
    }
}
