use crate::FormatError;

/// The input as UTF-8 without a leading byte order mark (editors on Windows add one; JSON
/// parsers reject it), or an error that says on which line the bad bytes are. Writers never add
/// one: a caller that wants it back, as the CLI does, puts it in front itself.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, FormatError> {
    let text = std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
        FormatError::InvalidUtf8 { line, offset }
    })?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(text))
}
