//! A message of the person's cut to fit: the very last resort of a request the window cannot hold.
//!
//! The person's latest message is the one thing a request must carry: the model is asked to
//! answer it. But a screenshot is 1,600 tokens and a pasted log can be more, and a window whose
//! system prompt and tools leave 2,000 holds neither beside a summary. Sent whole, the request is
//! refused, and the model sees nothing; Claude Code's rules summarize the message away. So, with
//! everything else cut, its images are left out (the largest first) and then its longest texts
//! cut to previews, each with a note naming the whole message, which is stored first.
//!
//! A cut is logged ([`crate::DecisionLog::message_cut`]) by what the message says and shows
//! ([`person_key`]) and made again, byte for byte, on every later request that carries it
//! ([`Pruner::prune`]): the client resends the message whole, and the provider counted the request
//! with it cut.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use condense_core::{Conversation, Message, Part, Text};
use condense_text::thousands;

use crate::inputs::shares;
use crate::note::preview;
use crate::{DecisionLog, MessageCut, MessageReport, PartCut, PruneError, Pruner, handle_of};

/// The key a message of the person's is logged by: its texts and its images' sources, in order,
/// and nothing of the wire fields a client moves from one request to the next (Claude Code marks
/// only its latest message with `cache_control`).
pub fn person_key(message: &Message) -> String {
    let mut bytes = Vec::new();
    for part in &message.parts {
        let source;
        let (kind, content) = match part {
            Part::Text(text) => (0u8, text.text.as_str()),
            Part::Image(image) => {
                source = image.source.to_string();
                (1u8, source.as_str())
            }
            _ => (2u8, ""),
        };
        bytes.push(kind);
        bytes.extend_from_slice(&content.len().to_le_bytes());
        bytes.extend_from_slice(content.as_bytes());
    }
    handle_of(&bytes)
}

/// One part of a message of the person's that may be cut.
struct Piece {
    message: usize,
    part: usize,
    tokens: usize,
}

impl Pruner<'_> {
    /// Cuts the person's messages in `conversation.messages[within]` until about `excess` tokens
    /// are freed: their images left out first, the largest first, each for `prune.image_note`;
    /// then, where that is not enough, their texts longer than `prune.message_note`, the
    /// largest first, each cut to the same share of tokens and followed by that note. The
    /// whole message is stored before any part of it is cut, and each cut logged in `log`.
    /// The last resort of a request still over the window with everything else cut: the
    /// provider would refuse it, and a refused request shows the model nothing. Where all of
    /// them cut would not free `excess`, nothing is cut (the request fails either way). Returns
    /// how many messages were cut. On error (a message that could not be stored) nothing has
    /// changed.
    pub fn preview_person_to_fit(
        &self,
        conversation: &mut Conversation,
        within: Range<usize>,
        excess: usize,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        if excess == 0 {
            return Ok(0);
        }
        let (images, texts) = self.person_pieces(conversation, within);
        let Some((left_out, cut, share)) = self.enough_of(&images, &texts, excess) else {
            return Ok(0);
        };
        let (images, texts) = (&images[..left_out], &texts[..cut]);
        let touched: BTreeSet<usize> = images
            .iter()
            .chain(texts)
            .map(|piece| piece.message)
            .collect();
        let handles = self.messages_stored(conversation, &touched)?;
        let cuts = self.rendered(conversation, images, texts, share, &handles);
        let count = cuts.len();
        for (message, mut parts) in cuts {
            parts.sort_by_key(|cut| cut.part);
            let key = person_key(&conversation.messages[message]);
            cut_parts(&mut conversation.messages[message], &parts);
            log.record_message(
                key,
                MessageCut {
                    handle: handles[&message].clone(),
                    parts,
                },
            );
        }
        Ok(count)
    }

    /// How much of `images` and `texts` (each the largest first) to cut for `excess` tokens to
    /// be freed: how many images are left out, the largest first, until they free enough; where
    /// they do not, how many texts are cut and the tokens each keeps ([`shares`]). `None` where
    /// all of them cut would not free enough: the request fails either way, and a cut that
    /// cannot make it fit only takes from the person's message what the model would have seen.
    fn enough_of(
        &self,
        images: &[Piece],
        texts: &[Piece],
        excess: usize,
    ) -> Option<(usize, usize, usize)> {
        let rules = &self.settings.rules;
        let image_note = self.note_tokens(&rules.image_note);
        let message_note = self.note_tokens(&rules.message_note);
        let freed_by = |piece: &Piece, note: usize| piece.tokens.saturating_sub(note);
        let most: usize = images
            .iter()
            .map(|image| freed_by(image, image_note))
            .chain(texts.iter().map(|text| freed_by(text, message_note)))
            .sum();
        if most < excess {
            return None;
        }
        let mut freed = 0;
        let mut left_out = 0;
        while freed < excess && left_out < images.len() {
            freed += freed_by(&images[left_out], image_note);
            left_out += 1;
        }
        if freed >= excess {
            return Some((left_out, 0, 0));
        }
        let sizes: Vec<usize> = texts.iter().map(|text| text.tokens).collect();
        let (cut, share) = shares(&sizes, excess - freed, message_note);
        Some((left_out, cut, share))
    }

    /// The text sent in place of each of `images` (`prune.image_note`) and each of `texts` (its
    /// preview of about `share` tokens and `prune.message_note`), by message, each naming its
    /// message's stored whole (`handles`).
    fn rendered(
        &self,
        conversation: &Conversation,
        images: &[Piece],
        texts: &[Piece],
        share: usize,
        handles: &BTreeMap<usize, String>,
    ) -> BTreeMap<usize, Vec<PartCut>> {
        let rules = &self.settings.rules;
        let mut cuts: BTreeMap<usize, Vec<PartCut>> = BTreeMap::new();
        for image in images {
            let text = rules.image_note.render(&[
                ("tool", "image"),
                ("tokens", &thousands(image.tokens)),
                ("chars", "0"),
                ("handle", &handles[&image.message]),
            ]);
            cuts.entry(image.message).or_default().push(PartCut {
                part: image.part,
                text,
            });
        }
        for piece in texts {
            let Some(Part::Text(text)) = conversation.messages[piece.message].parts.get(piece.part)
            else {
                continue;
            };
            let bytes = (text.text.len().saturating_mul(share) / piece.tokens.max(1))
                .min(rules.preview_bytes);
            let shown = preview(&text.text, bytes);
            let note = rules.message_note.render(&[
                ("tool", "message"),
                ("tokens", &thousands(piece.tokens)),
                ("chars", &thousands(text.text.chars().count())),
                ("handle", &handles[&piece.message]),
                ("shown", &thousands(shown.chars().count())),
            ]);
            cuts.entry(piece.message).or_default().push(PartCut {
                part: piece.part,
                text: format!("{shown}{note}"),
            });
        }
        cuts
    }

    /// The images and the long texts of the person's messages in `within`, each the largest
    /// first (among equals, the earliest).
    fn person_pieces(
        &self,
        conversation: &Conversation,
        within: Range<usize>,
    ) -> (Vec<Piece>, Vec<Piece>) {
        let note = self.note_tokens(&self.settings.rules.message_note);
        let (mut images, mut texts) = (Vec::new(), Vec::new());
        for (message, held) in conversation
            .messages
            .iter()
            .enumerate()
            .filter(|(index, held)| within.contains(index) && held.is_user_turn())
        {
            for (part, content) in held.parts.iter().enumerate() {
                let piece = Piece {
                    message,
                    part,
                    tokens: self.counter.count_part(content),
                };
                match content {
                    Part::Image(_) => images.push(piece),
                    // Longer than the note that would follow its preview (the largest are
                    // cut first, a smaller one only where they do not free enough).
                    Part::Text(text)
                        if piece.tokens > note
                            && !self.settings.rules.message_note.recognises(&text.text)
                            && !self.settings.rules.image_note.recognises(&text.text) =>
                    {
                        texts.push(piece);
                    }
                    _ => {}
                }
            }
        }
        images.sort_by_key(|piece| std::cmp::Reverse(piece.tokens));
        texts.sort_by_key(|piece| std::cmp::Reverse(piece.tokens));
        (images, texts)
    }

    /// Each message of `touched` stored whole (its parts as JSON) before any part of it is cut:
    /// the handle of each. A store that fails is an error, and nothing is cut.
    fn messages_stored(
        &self,
        conversation: &Conversation,
        touched: &BTreeSet<usize>,
    ) -> Result<BTreeMap<usize, String>, PruneError> {
        let mut handles = BTreeMap::new();
        for &message in touched {
            let whole =
                serde_json::to_string(&conversation.messages[message].parts).map_err(|error| {
                    PruneError::SerializeMessage {
                        message,
                        reason: error.to_string(),
                    }
                })?;
            let handle = handle_of(whole.as_bytes());
            self.store
                .put(&handle, whole.as_bytes())
                .map_err(|source| PruneError::StoreMessage { message, source })?;
            handles.insert(message, handle);
        }
        Ok(handles)
    }

    /// The cuts `log` holds made again on the person's messages of `conversation` they were
    /// made for, as [`Pruner::prune`] makes every frozen decision again: each message cut, with
    /// its tokens before and after. Nothing is looked up when the log holds no such cut.
    pub(crate) fn cut_person_again(
        &self,
        conversation: &mut Conversation,
        log: &DecisionLog,
    ) -> Vec<MessageReport> {
        if !log.has_message_cuts() {
            return Vec::new();
        }
        let mut cut_again = Vec::new();
        for (index, message) in conversation.messages.iter_mut().enumerate() {
            if !message.is_user_turn() {
                continue;
            }
            let Some(cut) = log.message_cut(&person_key(message)) else {
                continue;
            };
            let tokens_before = self.counter.count_message(message);
            cut_parts(message, &cut.parts);
            cut_again.push(MessageReport {
                message: index,
                tokens_before,
                tokens_after: self.counter.count_message(message),
            });
        }
        cut_again
    }
}

/// `message` with each of `cuts` made: the part at its place becomes its text, keeping the
/// part's wire fields (an image's `cache_control` goes to the text in its place). A place that
/// holds neither an image nor a text is left as it is.
fn cut_parts(message: &mut Message, cuts: &[PartCut]) {
    for cut in cuts {
        let Some(part) = message.parts.get_mut(cut.part) else {
            continue;
        };
        if let Part::Text(text) = part {
            text.text.clone_from(&cut.text);
        } else if let Part::Image(image) = part {
            let extra = std::mem::take(&mut image.extra);
            *part = Part::Text(Text {
                text: cut.text.clone(),
                extra,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use condense_core::{Image, Role};
    use condense_tokenizer::{Tiktoken, TokenCounter};
    use serde_json::json;

    use super::*;
    use crate::test_support::{Full, pruner};
    use crate::{MemoryStore, PruneSettings, Store};

    /// A screenshot the person sent: an image of unknown size, which is charged the cap (1,600
    /// tokens), with `cache_control` as Claude Code marks its latest message.
    fn screenshot(marked: bool) -> Part {
        let mut extra = condense_core::JsonMap::new();
        if marked {
            extra.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        Part::Image(Image {
            source: json!({"type": "url", "url": "https://example.com/shot.png"}),
            extra,
        })
    }

    /// A session whose last message is the person's, holding `parts`.
    fn asking(parts: Vec<Part>) -> Conversation {
        Conversation::new(vec![
            Message::text(Role::User, "fix the build"),
            Message::text(Role::Assistant, "Done."),
            Message::new(Role::User, parts),
        ])
    }

    #[test]
    fn an_image_is_left_out_first_the_message_stored_and_the_cut_made_again() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let words = Part::Text(Text {
            text: "[Image #1] the commits still show the wrong author".into(),
            extra: condense_core::JsonMap::new(),
        });
        let sent = asking(vec![screenshot(true), words.clone()]);
        let mut conversation = sent.clone();
        let mut log = DecisionLog::new();
        let before = counter.count_conversation(&conversation);

        // Nothing over: nothing cut, nothing logged.
        let cut = pruner.preview_person_to_fit(&mut conversation, 0..3, 0, &mut log);
        assert_eq!(cut.unwrap(), 0);
        assert_eq!(conversation, sent);
        assert!(log.is_empty());

        let cut = pruner.preview_person_to_fit(&mut conversation, 0..3, 500, &mut log);
        assert_eq!(cut.unwrap(), 1);
        let last = &conversation.messages[2];
        let Part::Text(note) = &last.parts[0] else {
            panic!("{:?}", last.parts[0]);
        };
        assert!(
            note.text
                .starts_with("[condense: an image (1,600 tokens) left out of this message"),
            "{}",
            note.text
        );
        // The image's wire fields go with the text in its place; the person's words stay.
        assert_eq!(note.extra["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(last.parts[1], words);
        assert!(counter.count_conversation(&conversation) + 1_500 < before);
        // The whole message is stored, under the handle the note names.
        let handle = &note.text[note.text.len() - 33..note.text.len() - 1];
        let whole = store.get(handle).unwrap();
        assert_eq!(
            serde_json::from_slice::<Vec<Part>>(&whole).unwrap(),
            sent.messages[2].parts
        );
        // The earlier messages are the person's too, and not touched.
        assert_eq!(conversation.messages[..2], sent.messages[..2]);

        // The next request: the client resends the message whole, no longer its latest, so
        // without its `cache_control`; the cut is made again, byte for byte, without the mark.
        let mut resent = asking(vec![screenshot(false), words.clone()]);
        resent
            .messages
            .push(Message::text(Role::Assistant, "Looking at it."));
        let again = pruner.cut_person_again(&mut resent, &log);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].message, 2);
        assert!(again[0].tokens_before > again[0].tokens_after + 1_500);
        let Part::Text(repeated) = &resent.messages[2].parts[0] else {
            panic!("{:?}", resent.messages[2].parts[0]);
        };
        assert_eq!(repeated.text, note.text);
        assert!(repeated.extra.is_empty());
        // Another message is not this one.
        let mut other = asking(vec![screenshot(false)]);
        assert!(pruner.cut_person_again(&mut other, &log).is_empty());
        assert!(matches!(other.messages[2].parts[0], Part::Image(_)));
    }

    #[test]
    fn a_long_text_is_cut_only_where_leaving_the_images_out_is_not_enough_and_cutting_is() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let report: String = (0..400)
            .map(|line| format!("error[E0{line:03}]: mismatched types at src/lib.rs:{line}\n"))
            .collect();
        let text_tokens = counter.count_text(&report);
        let sent = asking(vec![
            screenshot(false),
            Part::Text(Text {
                text: report.clone(),
                extra: condense_core::JsonMap::new(),
            }),
        ]);

        // The image alone frees enough: the text stays whole.
        let mut conversation = sent.clone();
        let mut log = DecisionLog::new();
        pruner
            .preview_person_to_fit(&mut conversation, 2..3, 1_000, &mut log)
            .unwrap();
        assert_eq!(conversation.messages[2].parts[1], sent.messages[2].parts[1]);

        // More than the image: the text is cut too, to its start and the note.
        let mut conversation = sent.clone();
        let mut log = DecisionLog::new();
        let excess = 1_600 + text_tokens / 2;
        pruner
            .preview_person_to_fit(&mut conversation, 2..3, excess, &mut log)
            .unwrap();
        let Part::Text(cut) = &conversation.messages[2].parts[1] else {
            panic!();
        };
        assert!(cut.text.starts_with("error[E0000]: mismatched types"));
        assert!(
            cut.text
                .contains("[condense: this message cut to its first")
        );
        assert!(settings.rules.message_note.recognises(&cut.text));
        let freed = counter.count_conversation(&sent) - counter.count_conversation(&conversation);
        assert!(freed >= excess, "{freed} < {excess}");
        // Where even all of it cut could not make the request fit, nothing is cut.
        let mut whole = sent.clone();
        let mut log = DecisionLog::new();
        let cut = pruner.preview_person_to_fit(&mut whole, 2..3, 1_600 + text_tokens, &mut log);
        assert_eq!(cut.unwrap(), 0);
        assert_eq!(whole, sent);
        assert!(log.is_empty());
        // A preview is not cut again.
        let mut log = DecisionLog::new();
        let mut again = conversation.clone();
        let cut = pruner.preview_person_to_fit(&mut again, 2..3, 100, &mut log);
        assert_eq!(cut.unwrap(), 0);
        assert_eq!(again, conversation);
    }

    #[test]
    fn a_message_that_cannot_be_stored_is_not_cut() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let pruner = pruner(&settings, &counter, &Full);
        let sent = asking(vec![screenshot(false)]);
        let mut conversation = sent.clone();
        let mut log = DecisionLog::new();
        let error = pruner
            .preview_person_to_fit(&mut conversation, 0..3, 500, &mut log)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("could not store the whole of the person's message 2"),
            "{error}"
        );
        assert_eq!(conversation, sent);
        assert!(log.is_empty());
    }
}
