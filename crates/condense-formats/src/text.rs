use crate::FormatError;

/// The input as UTF-8, or an error that says on which line the bad bytes are.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, FormatError> {
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
        FormatError::InvalidUtf8 { line, offset }
    })
}
