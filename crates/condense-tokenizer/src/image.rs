//! What an image costs. Its base64 text is not what the model reads, so counting it as text would
//! overstate a screenshot by a factor of a hundred. Anthropic publishes an estimate instead:
//! `width × height / 750` tokens, after the image is scaled to fit 1,568 pixels on its long edge,
//! which caps a full-size image at about 1,600 tokens. Dimensions are read from the PNG, GIF or
//! JPEG header; an image whose size cannot be read (a URL, another codec) is charged the cap.

use base64::Engine;
use serde_json::Value;

/// Tokens charged for an image whose dimensions are unknown: the most a full-size image costs.
pub const UNKNOWN_IMAGE_TOKENS: usize = 1_600;
const LONG_EDGE: f64 = 1_568.0;
const PIXELS_PER_TOKEN: f64 = 750.0;
/// Base64 characters decoded to find a JPEG's frame header (PNG and GIF need only the first few).
const HEADER_CHARS: usize = 64 * 1024;

pub(crate) fn image_tokens(source: &Value) -> usize {
    let Some((width, height)) = source_dimensions(source) else {
        return UNKNOWN_IMAGE_TOKENS;
    };
    tokens_for(width, height)
}

fn tokens_for(width: u32, height: u32) -> usize {
    let (w, h) = (f64::from(width), f64::from(height));
    let long = w.max(h);
    let scale = if long > LONG_EDGE {
        LONG_EDGE / long
    } else {
        1.0
    };
    let tokens = ((w * scale) * (h * scale) / PIXELS_PER_TOKEN).ceil();
    (tokens as usize).clamp(1, UNKNOWN_IMAGE_TOKENS)
}

fn source_dimensions(source: &Value) -> Option<(u32, u32)> {
    // Anthropic: {"type":"base64","data":…}; OpenAI: {"url":"data:image/png;base64,…"}.
    let data = match source.get("data").and_then(Value::as_str) {
        Some(data) => data,
        None => {
            let url = source.get("url").and_then(Value::as_str)?;
            url.split_once(";base64,")?.1
        }
    };
    let head = &data.as_bytes()[..data.len().min(HEADER_CHARS)];
    let head = &head[..head.len() - head.len() % 4];
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(head)
        .ok()?;
    dimensions(&bytes)
}

fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() >= 24 {
        let width = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
        let height = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
        return Some((width, height));
    }
    if (bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a")) && bytes.len() >= 10 {
        let width = u16::from_le_bytes([bytes[6], bytes[7]]);
        let height = u16::from_le_bytes([bytes[8], bytes[9]]);
        return Some((width.into(), height.into()));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return jpeg_dimensions(bytes);
    }
    None
}

/// Walks the JPEG segments to the first start-of-frame marker, which holds the size.
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    while at + 9 < bytes.len() {
        if bytes[at] != 0xFF {
            return None;
        }
        let marker = bytes[at + 1];
        let length = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        let is_frame = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_frame {
            let height = u16::from_be_bytes([bytes[at + 5], bytes[at + 6]]);
            let width = u16::from_be_bytes([bytes[at + 7], bytes[at + 8]]);
            return Some((width.into(), height.into()));
        }
        at += 2 + length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn png_header(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes.extend([8, 6, 0, 0, 0]);
        bytes
    }

    fn anthropic_source(bytes: &[u8]) -> Value {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        json!({"type": "base64", "media_type": "image/png", "data": data})
    }

    #[test]
    fn a_small_png_costs_its_area_over_750() {
        assert_eq!(image_tokens(&anthropic_source(&png_header(200, 150))), 40);
    }

    #[test]
    fn a_large_png_is_scaled_to_the_long_edge_and_capped() {
        // 3136 x 784 scales by one half to 1568 x 392: 819.5 -> 820 tokens.
        assert_eq!(image_tokens(&anthropic_source(&png_header(3136, 784))), 820);
        assert_eq!(
            image_tokens(&anthropic_source(&png_header(4000, 4000))),
            UNKNOWN_IMAGE_TOKENS
        );
    }

    #[test]
    fn openai_data_urls_and_gifs_are_read() {
        let mut gif = b"GIF89a".to_vec();
        gif.extend(300u16.to_le_bytes());
        gif.extend(100u16.to_le_bytes());
        gif.extend([0; 6]);
        let data = base64::engine::general_purpose::STANDARD.encode(&gif);
        let source = json!({"url": format!("data:image/gif;base64,{data}")});
        assert_eq!(image_tokens(&source), 40);
    }

    #[test]
    fn a_jpeg_frame_header_is_found_past_other_segments() {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00];
        jpeg.extend([0xFF, 0xC0, 0x00, 0x11, 0x08]);
        jpeg.extend(75u16.to_be_bytes());
        jpeg.extend(100u16.to_be_bytes());
        jpeg.extend([0; 12]);
        assert_eq!(dimensions(&jpeg), Some((100, 75)));
    }

    #[test]
    fn an_unreadable_image_costs_the_cap() {
        assert_eq!(
            image_tokens(&json!({"url": "https://example.com/a.png"})),
            UNKNOWN_IMAGE_TOKENS
        );
        assert_eq!(
            image_tokens(&json!({"data": "not base64!"})),
            UNKNOWN_IMAGE_TOKENS
        );
    }
}
