//! Keys back in the order they came. serde_json keeps an object's keys in order, but condense
//! rebuilds what it interprets (a message's content, an item) from its own model, in an order
//! of its own; a log written back unchanged should be the same bytes, so the reader keeps the
//! shape of what it took apart and the writer puts the rebuilt keys back in that order.

use condense_core::JsonMap;
use serde_json::Value;

/// The wire field of a record that holds the shape of what the reader took apart (that value
/// with every string emptied): its keys, in order, at every level. Removed again on writing.
pub(crate) const ORDER: &str = "condense_key_order";

/// `value` with its strings emptied: the shape of an item (its keys, in order, at every level),
/// without its text.
pub(crate) fn skeleton(value: &Value) -> Value {
    match value {
        Value::String(_) => Value::String(String::new()),
        Value::Array(items) => Value::Array(items.iter().map(skeleton).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), skeleton(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `value` with the keys of each object in the order `like` has them (at every level where the
/// two have the same shape); keys `like` lacks come after, in their own order.
pub(crate) fn ordered_like(value: Value, like: &Value) -> Value {
    match (value, like) {
        (Value::Object(mut fields), Value::Object(model)) => {
            let mut ordered = JsonMap::with_capacity(fields.len());
            for (key, model_value) in model {
                if let Some(value) = fields.shift_remove(key) {
                    ordered.insert(key.clone(), ordered_like(value, model_value));
                }
            }
            ordered.append(&mut fields);
            Value::Object(ordered)
        }
        (Value::Array(items), Value::Array(model)) if items.len() == model.len() => Value::Array(
            items
                .into_iter()
                .zip(model)
                .map(|(item, model)| ordered_like(item, model))
                .collect(),
        ),
        (value, _) => value,
    }
}
