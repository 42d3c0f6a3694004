//! The Python binding of condense: the extension module `condense._condense`, which the
//! package `condense` (`python/condense/`) wraps in Python classes.
//!
//! A request body crosses the boundary as Python objects (dicts, lists, strings, numbers),
//! walked straight into JSON values and back, or as JSON text; a session state and a report as
//! JSON text. What condense writes is exactly what the CLI writes for the same session (the
//! tests compare the bytes). The GIL is released while Rust works, so other Python threads (and
//! `aprepare`'s event loop) go on.
#![warn(missing_docs)]

use std::path::PathBuf;

use condense_formats::Format;
use condense_host::{Compactor as Inner, Config, SessionState, Sources};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

create_exception!(
    _condense,
    CondenseError,
    PyException,
    "A condense error: bad input, a bad setting, a failed summarizer. Its message is the CLI's."
);

fn error(message: impl std::fmt::Display) -> PyErr {
    CondenseError::new_err(message.to_string())
}

/// A wire format by the name the Python API uses.
fn format_named(name: &str) -> PyResult<Format> {
    match name {
        "openai" => Ok(Format::OpenAi),
        "anthropic" => Ok(Format::Anthropic),
        "responses" | "openai-responses" => Ok(Format::Responses),
        other => Err(error(format!(
            "unknown format `{other}` (expected openai, anthropic or responses)"
        ))),
    }
}

fn runtime() -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|failure| error(format!("condense could not start its runtime: {failure}")))
}

/// The compactor, configured as the CLI is: the built-in file, the user's and the project's,
/// `config` if given, the `CONDENSE_*` variables, then `settings` (each `(name, value)` a key
/// such as `context_window` or `prune.protect_tokens`, the value as a flag would give it).
#[pyclass(module = "condense._condense", frozen)]
struct Compactor {
    inner: Inner,
    config: Config,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor").finish_non_exhaustive()
    }
}

/// What one call gave: the body written in its format (`None` when nothing changed: the body
/// as it came), the session state and the report as JSON text, and the report in words.
type Prepared = (Option<Written>, String, String, String);

/// A body condense wrote, handed to Python as objects (`value()`) or as the text the CLI
/// writes (`text()`), each made only when asked.
#[pyclass(module = "condense._condense", frozen)]
struct Written {
    format: Format,
    value: Value,
}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Written")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

#[pymethods]
impl Written {
    /// The body as Python objects.
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.value)
    }

    /// The body's list of messages (`messages`, or a Responses body's `input`) as Python
    /// objects.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = match self.format {
            Format::Responses => "input",
            _ => "messages",
        };
        to_python(py, self.value.get(list).unwrap_or(&Value::Null))
    }

    /// The body as the CLI writes it: pretty-printed JSON and a newline.
    fn text(&self) -> PyResult<String> {
        let mut text = serde_json::to_string_pretty(&self.value).map_err(error)?;
        text.push('\n');
        Ok(text)
    }
}

/// A request body given from Python: a dict (walked into a JSON value) or JSON text.
fn body_of(body: &Bound<'_, PyAny>) -> PyResult<Result<Value, String>> {
    if let Ok(text) = body.cast::<PyString>() {
        return Ok(Err(text.to_str()?.to_owned()));
    }
    if let Ok(bytes) = body.cast::<PyBytes>() {
        return Ok(Err(String::from_utf8(bytes.as_bytes().to_vec()).map_err(
            |failure| {
                error(format!(
                    "the body is not UTF-8 (byte {})",
                    failure.utf8_error().valid_up_to()
                ))
            },
        )?));
    }
    to_value(body, "body").map(Ok)
}

/// The provider's refusal of a request as longer than the window, from `refused`: the count
/// it gave (an `int`), or its error body (JSON text, bytes, or a dict), read as
/// [`condense_host::refusal::too_long`] reads it. Any other error is not condense's to act on.
fn refusal_of(refused: &Bound<'_, PyAny>) -> PyResult<condense_host::refusal::TooLong> {
    use condense_host::refusal::{TooLong, too_long};
    if let Ok(number) = refused.cast::<PyInt>() {
        return Ok(TooLong::Counted(number.extract()?));
    }
    let text = match body_of(refused)? {
        Ok(value) => value.to_string(),
        Err(text) => text,
    };
    too_long(text.as_bytes()).ok_or_else(|| {
        error(
            "`refused`: the provider's error is not a refusal of the request as longer than the window (Anthropic's \"prompt is too long\", OpenAI's `context_length_exceeded`): nothing for condense to compact, give the error to the caller",
        )
    })
}

/// A Python object as a JSON value; `at` names where it is, for the error.
fn to_value(object: &Bound<'_, PyAny>, at: &str) -> PyResult<Value> {
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(flag) = object.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if let Ok(text) = object.cast::<PyString>() {
        return Ok(Value::String(text.to_str()?.to_owned()));
    }
    if let Ok(number) = object.cast::<PyInt>() {
        if let Ok(small) = number.extract::<i64>() {
            return Ok(Value::from(small));
        }
        if let Ok(large) = number.extract::<u64>() {
            return Ok(Value::from(large));
        }
        // Past 64 bits: its digits, which serde_json keeps (arbitrary precision).
        let digits = number.str()?.to_str()?.to_owned();
        return serde_json::from_str(&digits).map_err(error);
    }
    if let Ok(number) = object.cast::<PyFloat>() {
        return serde_json::Number::from_f64(number.value())
            .map(Value::Number)
            .ok_or_else(|| error(format!("{at}: {} is not a JSON number", number.value())));
    }
    if let Ok(map) = object.cast::<PyDict>() {
        let mut out = serde_json::Map::with_capacity(map.len());
        for (key, item) in map.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| error(format!("{at}: a key is not a string")))?
                .to_str()?
                .to_owned();
            let value = to_value(&item, at)?;
            out.insert(key, value);
        }
        return Ok(Value::Object(out));
    }
    if let Ok(list) = object.cast::<PyList>() {
        return list
            .iter()
            .map(|item| to_value(&item, at))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = object.cast::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| to_value(&item, at))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(error(format!(
        "{at}: a {} is not JSON (dicts, lists, strings, numbers, booleans and None are)",
        object.get_type().name()?
    )))
}

/// A JSON value as Python objects.
fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => {
            if let Some(small) = number.as_i64() {
                small.into_pyobject(py)?.into_any()
            } else if let Some(large) = number.as_u64() {
                large.into_pyobject(py)?.into_any()
            } else if number.as_str().contains(['.', 'e', 'E']) {
                PyFloat::new(py, number.as_f64().unwrap_or(f64::NAN)).into_any()
            } else {
                // An integer past 64 bits, from its digits.
                py.get_type::<PyInt>().call1((number.as_str(),))?
            }
        }
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Reads a body given as a value or as text.
fn read(body: Result<Value, String>, format: Format) -> PyResult<condense_core::Conversation> {
    let read = match body {
        Ok(value) => condense_formats::read_json(format, value),
        Err(text) => condense_formats::read(text.as_bytes(), Some(format)).map(|(_, read)| read),
    };
    read.map_err(|failure| error(format!("condense: {failure}")))
}

#[pymethods]
impl Compactor {
    #[new]
    #[pyo3(signature = (config=None, settings=Vec::new()))]
    fn new(config: Option<PathBuf>, settings: Vec<(String, String)>) -> PyResult<Self> {
        let cwd = std::env::current_dir().map_err(error)?;
        let mut sources = Sources::discover(&cwd, config).map_err(error)?;
        for (name, value) in settings {
            let at = format!("Compactor({name}=…)");
            let key = condense_host::config::key_named(&name, &at).map_err(error)?;
            sources.flags.push((at, key, value));
        }
        let config = Config::load(&sources).map_err(error)?;
        if config.summarizer_kind() == condense_host::SummarizerKind::Upstream {
            return Err(error(
                "summarizer.kind = \"upstream\" asks the request's own upstream with the client's credentials: only `condense serve` has them; use extractive, openai or anthropic",
            ));
        }
        let dir = config.store_dir();
        if dir.to_string_lossy().starts_with("redis://") {
            return Err(error(
                "store.dir: the Python binding keeps originals in a directory; a Redis store is the proxy's and the CLI's",
            ));
        }
        let (plugins, _warnings) =
            condense_host::plugins::load_all(&config.plugins).map_err(error)?;
        let inner = Inner::with_plugins(&config, &plugins)
            .map_err(error)?
            .with_store(Box::new(condense_host::DirStore::new(
                std::path::absolute(&dir).unwrap_or(dir),
            )));
        Ok(Compactor {
            inner,
            config,
            runtime: runtime()?,
        })
    }

    /// The per-request path: frozen decisions from `state` (a state's JSON, or none for a new
    /// session), pruned, and summarized only when due; `usage` is the provider's count of the
    /// request that the body's last assistant message answered (its input and that answer),
    /// when the harness has it; `refused`, the provider's refusal of the request last prepared
    /// from `state` as longer than the window: its error (a body), or the count it gave;
    /// `cut_short`, the provider's count of the input of the request last prepared from
    /// `state`, whose reply stopped at the limit condense lowered it to.
    #[pyo3(signature = (body, format, state=None, usage=None, refused=None, cut_short=None))]
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &self,
        py: Python<'_>,
        body: &Bound<'_, PyAny>,
        format: &str,
        state: Option<&str>,
        usage: Option<usize>,
        refused: Option<&Bound<'_, PyAny>>,
        cut_short: Option<usize>,
    ) -> PyResult<Prepared> {
        let format = format_named(format)?;
        let body = body_of(body)?;
        let mut state = match state {
            Some(text) => SessionState::from_json(text).map_err(error)?,
            None => SessionState::default(),
        };
        let refused = refused.map(refusal_of).transpose()?;
        if usage.is_some() && refused.is_some() {
            return Err(error(
                "`usage` and `refused` are for two different requests: `usage` for the one the body's last assistant message answered, `refused` for the one last prepared, which got no answer",
            ));
        }
        if cut_short.is_some() && (usage.is_some() || refused.is_some()) {
            return Err(error(
                "`cut_short` is for the request last prepared, whose reply stopped at the limit condense lowered: it got no answer to count (`usage`), and was not refused (`refused`)",
            ));
        }
        if cut_short.is_some() && !state.record_cut_short(cut_short) {
            return Err(error(
                "`cut_short`: condense did not lower the reply's limit of the request last prepared from this state; a reply cut at the limit the harness asked is the harness's to handle",
            ));
        }
        py.detach(|| {
            let conversation = read(body, format)?;
            if let Some(refusal) = refused {
                let window = self.inner.tail_for(&conversation).context_window;
                if !state.record_refusal(refusal.input_tokens(window)) {
                    return Err(error(
                        "`refused`: no request was prepared from this state; give the state the refused request was prepared with",
                    ));
                }
            }
            // The figure stands at the answer to the request condense sent, as the proxy
            // places it (after a summary the client's history is longer than what was sent:
            // an index there lay past the request, and the figure was dropped). Without a
            // request prepared from this state, at the last assistant message the body holds.
            if let Some(tokens) = usage
                && !state.record_answer(tokens)
                && let Some(at) = conversation
                    .messages
                    .iter()
                    .rposition(|message| message.role == condense_core::Role::Assistant)
            {
                state.reported_usage = Some(condense_host::ReportedUsage::answered(at, tokens));
            }
            let original = conversation.clone();
            let compaction = self
                .runtime
                .block_on(self.inner.prepare(conversation, &mut state))
                .map_err(error)?;
            self.finish(format, &original, &compaction, &state)
        })
    }

    /// A one-off compaction with fresh decisions, as `condense compact` makes of a saved
    /// session (no continuation).
    fn compact(&self, py: Python<'_>, body: &Bound<'_, PyAny>, format: &str) -> PyResult<Prepared> {
        self.one_off(py, body, format, false)
    }

    /// Phase 1 alone with fresh decisions, as `condense prune` does: the agent's
    /// `trim_tool_result` calls applied (their reports in `prune.trims`), then pruning.
    fn prune(&self, py: Python<'_>, body: &Bound<'_, PyAny>, format: &str) -> PyResult<Prepared> {
        self.one_off(py, body, format, true)
    }

    /// The tokens of a body, as the trigger counts them.
    fn count(&self, py: Python<'_>, body: &Bound<'_, PyAny>, format: &str) -> PyResult<usize> {
        let format = format_named(format)?;
        let body = body_of(body)?;
        py.detach(|| {
            let conversation = read(body, format)?;
            Ok(self.inner.counter().count_conversation(&conversation))
        })
    }

    /// The original a placeholder's handle names, from this configuration's store.
    fn recall(&self, py: Python<'_>, handle: &str) -> PyResult<Vec<u8>> {
        recall_from(py, handle, self.config.store_dir())
    }

    /// The effective configuration, as `condense config show` prints it.
    fn config_show(&self) -> String {
        self.config.show()
    }
}

impl Compactor {
    /// `compact` (or `prune`, phase 1 alone) on a body, with fresh decisions.
    fn one_off(
        &self,
        py: Python<'_>,
        body: &Bound<'_, PyAny>,
        format: &str,
        prune_only: bool,
    ) -> PyResult<Prepared> {
        let format = format_named(format)?;
        let body = body_of(body)?;
        py.detach(|| {
            let conversation = read(body, format)?;
            let original = conversation.clone();
            let run = if prune_only {
                self.runtime.block_on(self.inner.prune(conversation))
            } else {
                self.runtime.block_on(self.inner.compact(conversation))
            };
            let compaction = run.map_err(error)?;
            self.finish(format, &original, &compaction, &SessionState::default())
        })
    }

    /// The answer for `compaction` of a body read as `original`: what condense wrote, or
    /// `None` when nothing changed (the body as it came stands, as the CLI gives back a file's
    /// own bytes).
    fn finish(
        &self,
        format: Format,
        original: &condense_core::Conversation,
        compaction: &condense_host::Compaction,
        state: &SessionState,
    ) -> PyResult<Prepared> {
        let written = if compaction.conversation == *original {
            None
        } else {
            let value = condense_formats::to_value(format, &compaction.conversation)
                .ok_or_else(|| error("condense writes request bodies only"))?;
            Some(Written { format, value })
        };
        let report = serde_json::to_string(&compaction.report).map_err(error)?;
        let text = condense_host::render_report(
            "request",
            format.name(),
            &self.config,
            &compaction.report,
            false,
            None,
        );
        Ok((written, state.to_json(), report, text))
    }
}

fn recall_from(py: Python<'_>, handle: &str, dir: PathBuf) -> PyResult<Vec<u8>> {
    if !condense_pruner::is_handle(handle) {
        return Err(error(format!(
            "`{handle}` is not a handle: a handle is the 32 lowercase hex digits after `condense recall` in a placeholder"
        )));
    }
    py.detach(|| {
        use condense_host::Store as _;
        condense_host::DirStore::new(&dir)
            .get(handle)
            .map_err(|failure| error(format!("store {}: {failure}", dir.display())))
    })
}

/// The original a placeholder's handle names, from the store in `store` (a directory), or the
/// built-in configuration's when none is given.
#[pyfunction]
#[pyo3(signature = (handle, store=None))]
fn recall(py: Python<'_>, handle: &str, store: Option<PathBuf>) -> PyResult<Vec<u8>> {
    let dir = match store {
        Some(dir) => dir,
        None => Config::built_in().map_err(error)?.store_dir(),
    };
    recall_from(py, handle, dir)
}

/// The `trim_tool_result` tool as `format`'s tool list wants it, as JSON.
#[pyfunction]
fn tools_schema(format: &str) -> PyResult<String> {
    let format = format_named(format)?;
    let tool = condense_formats::tool_definition(
        format,
        condense_pruner::TRIM_TOOL,
        condense_pruner::TRIM_TOOL_DESCRIPTION,
        condense_pruner::trim_tool_parameters(),
    );
    serde_json::to_string(&tool).map_err(error)
}

/// The `condense._condense` module.
#[pymodule]
fn _condense(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Compactor>()?;
    module.add_class::<Written>()?;
    module.add_function(wrap_pyfunction!(recall, module)?)?;
    module.add_function(wrap_pyfunction!(tools_schema, module)?)?;
    module.add("CondenseError", module.py().get_type::<CondenseError>())?;
    Ok(())
}
