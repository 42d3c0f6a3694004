//! Anthropic content blocks, shared by the Messages API format and Claude Code's session log
//! (which stores Anthropic messages line by line).

use condense_core::{
    ContentShape, Image, JsonMap, Part, Text, Thinking, ToolCall, ToolOutput, ToolResult,
};
use serde_json::Value;

/// A message's `content` as parts, with the shape to write it back in.
pub(crate) fn parts_from_content(
    content: Option<Value>,
) -> Result<(Vec<Part>, ContentShape), String> {
    content_with(content, part_from_block, "a list of blocks")
}

/// A `content` value, in any format: absent, `null`, one string, or a list whose items `part`
/// reads (each format has its own part types); with the shape to write it back in. `list` names
/// the list in the error for anything else.
pub(crate) fn content_with(
    content: Option<Value>,
    part: impl Fn(Value) -> Result<Part, String>,
    list: &str,
) -> Result<(Vec<Part>, ContentShape), String> {
    match content {
        None => Ok((Vec::new(), ContentShape::Absent)),
        Some(Value::Null) => Ok((Vec::new(), ContentShape::Null)),
        Some(Value::String(text)) => Ok((vec![Part::text(text)], ContentShape::String)),
        Some(Value::Array(items)) => Ok((
            items.into_iter().map(part).collect::<Result<_, _>>()?,
            ContentShape::Blocks,
        )),
        Some(other) => Err(format!(
            "`content` must be a string or {list}, not {}",
            kind_of(&other)
        )),
    }
}

/// Parts as a `content` value in `shape`; `None` means "no content key". A string shape is kept
/// only while the parts are still one plain text, otherwise blocks are written.
pub(crate) fn content_from_parts<'p>(
    parts: impl IntoIterator<Item = &'p Part>,
    shape: ContentShape,
) -> Option<Value> {
    let parts: Vec<&Part> = parts.into_iter().collect();
    match (shape, parts.as_slice()) {
        (ContentShape::Absent, []) => None,
        (ContentShape::Null, []) => Some(Value::Null),
        (ContentShape::String, [Part::Text(text)]) if text.extra.is_empty() => {
            Some(Value::String(text.text.clone()))
        }
        _ => Some(Value::Array(
            parts.into_iter().map(block_from_part).collect(),
        )),
    }
}

fn part_from_block(block: Value) -> Result<Part, String> {
    let Value::Object(mut fields) = block else {
        return Err(format!(
            "a content block must be an object, not {}",
            kind_of(&block)
        ));
    };
    let kind = fields
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let part = match kind.as_str() {
        "text" => match take_string(&mut fields, "text") {
            Some(text) => Part::Text(Text {
                text,
                extra: without_type(fields),
            }),
            None => return Err("a text block has no `text` string".into()),
        },
        "tool_use" => {
            let (Some(id), Some(name)) = (
                take_string(&mut fields, "id"),
                take_string(&mut fields, "name"),
            ) else {
                return Err("a tool_use block needs an `id` and a `name`".into());
            };
            let input = fields.shift_remove("input").unwrap_or(Value::Null);
            Part::ToolCall(ToolCall {
                id,
                name,
                input,
                raw_input: None,
                embedded: false,
                extra: without_type(fields),
            })
        }
        "tool_result" => tool_result_of(fields)?,
        "image" => match fields.shift_remove("source") {
            Some(source) => Part::Image(Image {
                source,
                extra: without_type(fields),
            }),
            None => return Err("an image block has no `source`".into()),
        },
        "thinking" => match take_string(&mut fields, "thinking") {
            Some(text) => {
                let signature = take_string(&mut fields, "signature");
                Part::Thinking(Thinking {
                    text,
                    signature,
                    extra: without_type(fields),
                })
            }
            None => return Err("a thinking block has no `thinking` string".into()),
        },
        _ => Part::Opaque {
            value: Value::Object(fields),
        },
    };
    Ok(part)
}

/// A `tool_result` block, its `type` already read: the call it answers, its content (a string
/// or blocks), whether it is an error, and its other fields as they came.
fn tool_result_of(mut fields: JsonMap) -> Result<Part, String> {
    let Some(call_id) = take_string(&mut fields, "tool_use_id") else {
        return Err("a tool_result block has no `tool_use_id`".into());
    };
    let content = match fields.shift_remove("content") {
        Some(Value::String(text)) => ToolOutput::Text(text),
        Some(Value::Array(blocks)) => ToolOutput::Parts(
            blocks
                .into_iter()
                .map(part_from_block)
                .collect::<Result<_, _>>()?,
        ),
        None | Some(Value::Null) => ToolOutput::Parts(Vec::new()),
        Some(other) => {
            return Err(format!(
                "a tool_result's `content` must be a string or blocks, not {}",
                kind_of(&other)
            ));
        }
    };
    let is_error = match fields.shift_remove("is_error") {
        None => None,
        Some(Value::Bool(flag)) => Some(flag),
        Some(other) => {
            return Err(format!(
                "`is_error` must be a boolean, not {}",
                kind_of(&other)
            ));
        }
    };
    Ok(Part::ToolResult(ToolResult {
        call_id,
        content,
        is_error,
        embedded: false,
        compacted: None,
        extra: without_type(fields),
    }))
}

pub(crate) fn block_from_part(part: &Part) -> Value {
    let mut block = JsonMap::new();
    match part {
        Part::Text(text) => {
            block.insert("type".into(), "text".into());
            block.insert("text".into(), text.text.clone().into());
            extend(&mut block, &text.extra);
        }
        Part::ToolCall(call) => {
            block.insert("type".into(), "tool_use".into());
            block.insert("id".into(), call.id.clone().into());
            block.insert("name".into(), call.name.clone().into());
            block.insert("input".into(), call.input.clone());
            extend(&mut block, &call.extra);
        }
        Part::ToolResult(result) => {
            block.insert("type".into(), "tool_result".into());
            block.insert("tool_use_id".into(), result.call_id.clone().into());
            let content = match &result.content {
                ToolOutput::Text(text) => Value::String(text.clone()),
                ToolOutput::Parts(parts) => {
                    Value::Array(parts.iter().map(block_from_part).collect())
                }
            };
            block.insert("content".into(), content);
            if let Some(flag) = result.is_error {
                block.insert("is_error".into(), flag.into());
            }
            extend(&mut block, &result.extra);
        }
        Part::Image(image) => {
            block.insert("type".into(), "image".into());
            block.insert(
                "source".into(),
                crate::image::anthropic_source(&image.source),
            );
            extend(&mut block, &image.extra);
        }
        Part::Thinking(thinking) => {
            block.insert("type".into(), "thinking".into());
            block.insert("thinking".into(), thinking.text.clone().into());
            if let Some(signature) = &thinking.signature {
                block.insert("signature".into(), signature.clone().into());
            }
            extend(&mut block, &thinking.extra);
        }
        Part::Opaque { value } => return value.clone(),
    }
    Value::Object(block)
}

pub(crate) fn take_string(fields: &mut JsonMap, key: &str) -> Option<String> {
    match fields.shift_remove(key) {
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            fields.insert(key.to_owned(), other);
            None
        }
        None => None,
    }
}

fn without_type(mut fields: JsonMap) -> JsonMap {
    fields.shift_remove("type");
    fields
}

pub(crate) fn extend(target: &mut JsonMap, extra: &JsonMap) {
    for (key, value) in extra {
        target.insert(key.clone(), value.clone());
    }
}

pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
