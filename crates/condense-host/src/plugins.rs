//! Loading plugins: shared libraries through the C ABI of `condense-plugin`, or plugins a
//! harness registers in process. Either way the host ends up with a [`LoadedPlugin`]: plain data,
//! read once. Libraries are loaded once and never unloaded (their functions may be referenced
//! for the life of the process).
// Loading a shared library and calling through its table is what this module is for; every
// unsafe block says what it relies on.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use condense_plugin::{ABI_VERSION, Plugin, PluginTable, SYMBOL, Sink, Status, Str, TableHeader};

use crate::PluginSpec;

/// What a plugin contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedPlugin {
    /// The shared library; `None` for a plugin registered in process.
    pub path: Option<PathBuf>,
    /// The name the plugin reports.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The tools whose outputs it protects.
    pub protected_tools: Vec<String>,
    /// Its compaction template, if it has one.
    pub template: Option<String>,
}

impl LoadedPlugin {
    /// Where the plugin came from, for messages.
    pub fn origin(&self) -> String {
        match &self.path {
            Some(path) => format!("`{}` ({})", self.name, path.display()),
            None => format!("`{}` (in process)", self.name),
        }
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a plugin could not be loaded or called; each names the plugin.
#[non_exhaustive]
pub enum PluginError {
    #[error("{}: no such plugin file", path.display())]
    /// No file at the path.
    Missing {
        /// The library.
        path: PathBuf,
    },
    #[error("{}: not a loadable shared library: {message}", path.display())]
    /// The file is not a loadable library.
    NotALibrary {
        /// The library.
        path: PathBuf,
        /// The loader's message.
        message: String,
    },
    #[error("{}: does not export `condense_plugin_v1`: not a condense plugin, or built for another ABI", path.display())]
    /// The library does not export `condense_plugin_v1`.
    NoSymbol {
        /// The library.
        path: PathBuf,
    },
    #[error("{}: `condense_plugin_v1` returned no table", path.display())]
    /// The plugin returned no table.
    NullTable {
        /// The library.
        path: PathBuf,
    },
    #[error("{}: built for plugin ABI version {found}; this condense speaks version {expected}", path.display())]
    /// The plugin was built for another ABI version.
    AbiVersion {
        /// The library.
        path: PathBuf,
        /// The version it reports.
        found: u32,
        /// The version this host speaks.
        expected: u32,
    },
    #[error("{}: its plugin table is {found} bytes, smaller than the {expected} bytes of ABI version {ABI_VERSION}", path.display())]
    /// The table is smaller than this ABI version's.
    TableTooSmall {
        /// The library.
        path: PathBuf,
        /// Its size in bytes.
        found: usize,
        /// The size this host needs.
        expected: usize,
    },
    #[error("{plugin}: `{function}` panicked: {message}")]
    /// A plugin function panicked.
    Panicked {
        /// The plugin.
        plugin: String,
        /// The function.
        function: &'static str,
        /// The panic message.
        message: String,
    },
    #[error(
        "{plugin}: its name {name:?} {reason}: a name is shown in reports, logs and `plugins list`"
    )]
    /// The name a plugin reports cannot be shown safely (empty, or with control characters
    /// such as a newline or a terminal escape).
    BadName {
        /// The plugin (its file, or that it is in process).
        plugin: String,
        /// The name, shown escaped.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    #[error("{plugin}: `{function}` returned text that is not UTF-8")]
    /// A plugin function returned text that is not UTF-8.
    NotUtf8 {
        /// The plugin.
        plugin: String,
        /// The function.
        function: &'static str,
    },
    #[error("{plugin}: `{function}` failed: {message}")]
    /// A plugin function reported an error.
    Failed {
        /// The plugin.
        plugin: String,
        /// The function.
        function: &'static str,
        /// Its message.
        message: String,
    },
}

/// Loads every configured plugin. A plugin marked `required = false` that fails to load is
/// skipped with a warning (returned, for the caller to show); a required one is an error.
pub fn load_all(specs: &[PluginSpec]) -> Result<(Vec<LoadedPlugin>, Vec<String>), PluginError> {
    let mut loaded = Vec::new();
    let mut warnings = Vec::new();
    for spec in specs {
        match load(&spec.path, &spec.config) {
            Ok(plugin) => loaded.push(plugin),
            Err(error) if !spec.required => {
                warnings.push(format!("skipping an optional plugin: {error}"))
            }
            Err(error) => return Err(error),
        }
    }
    Ok((loaded, warnings))
}

/// Loads one shared library and asks it everything once.
pub fn load(path: &Path, config_toml: &str) -> Result<LoadedPlugin, PluginError> {
    let path_buf = path.to_path_buf();
    if !path.is_file() {
        return Err(PluginError::Missing { path: path_buf });
    }
    // SAFETY: loading a library runs its initialisers; a configured plugin is code the user chose
    // to run, as with any plugin system.
    let library =
        unsafe { libloading::Library::new(path) }.map_err(|error| PluginError::NotALibrary {
            path: path_buf.clone(),
            message: error.to_string(),
        })?;
    // SAFETY: the symbol's type is the ABI's: `extern "C" fn() -> *const PluginTable`.
    let entry =
        unsafe { library.get::<extern "C" fn() -> *const TableHeader>(SYMBOL) }.map_err(|_| {
            PluginError::NoSymbol {
                path: path_buf.clone(),
            }
        })?;
    let header_ptr = entry();
    if header_ptr.is_null() {
        return Err(PluginError::NullTable { path: path_buf });
    }
    // SAFETY: every ABI version's table starts with the header, so reading it is in bounds.
    let header = unsafe { *header_ptr };
    if header.abi_version != ABI_VERSION {
        return Err(PluginError::AbiVersion {
            path: path_buf,
            found: header.abi_version,
            expected: ABI_VERSION,
        });
    }
    let expected = std::mem::size_of::<PluginTable>();
    if header.size < expected {
        return Err(PluginError::TableTooSmall {
            path: path_buf,
            found: header.size,
            expected,
        });
    }
    // SAFETY: the plugin says its table is a version-1 table at least this large; it is static.
    let table: &'static PluginTable = unsafe { &*header_ptr.cast::<PluginTable>() };
    // Never unloaded: `table` and its functions must stay valid for the life of the process.
    std::mem::forget(library);

    let label = path.display().to_string();
    let config = Str::new(config_toml);
    call(&label, "configure", |sink, ctx| {
        (table.configure)(config, sink, ctx)
    })?;
    let name = first(call(&label, "name", |sink, ctx| (table.name)(sink, ctx))?);
    check_name(&label, &name)?;
    let plugin = format!("{label} ({name})");
    let version = first(call(&plugin, "version", |sink, ctx| {
        (table.version)(sink, ctx)
    })?);
    let protected_tools = call(&plugin, "protected_tools", |sink, ctx| {
        (table.protected_tools)(sink, ctx)
    })?;
    let template = call(&plugin, "template", |sink, ctx| (table.template)(sink, ctx))?
        .into_iter()
        .next();
    Ok(LoadedPlugin {
        path: Some(path_buf),
        name,
        version,
        protected_tools,
        template,
    })
}

/// A plugin registered in process: the same trait, no library, called in the trait's documented
/// order (`configure` first, then `name`, `version`, `protected_tools`, `template`). Panics are
/// caught as they are at the ABI boundary, and their message is kept for the error.
pub fn register(plugin: &mut dyn Plugin, config_toml: &str) -> Result<LoadedPlugin, PluginError> {
    // Until `name` has answered, the plugin is known by what it is: an in-process plugin.
    let mut label = "(in-process plugin)".to_owned();
    let catch =
        |label: &str, function: &'static str, body: &mut dyn FnMut() -> Result<(), String>| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(message)) => Err(PluginError::Failed {
                    plugin: label.to_owned(),
                    function,
                    message,
                }),
                Err(payload) => Err(PluginError::Panicked {
                    plugin: label.to_owned(),
                    function,
                    message: condense_plugin::panic_message(payload.as_ref())
                        .unwrap_or_else(|| "the plugin panicked".to_owned()),
                }),
            }
        };
    catch(&label, "configure", &mut || plugin.configure(config_toml))?;
    let mut loaded = LoadedPlugin {
        path: None,
        name: String::new(),
        version: String::new(),
        protected_tools: Vec::new(),
        template: None,
    };
    catch(&label, "name", &mut || {
        loaded.name = plugin.name().to_owned();
        Ok(())
    })?;
    check_name(&label, &loaded.name)?;
    label.clone_from(&loaded.name);
    catch(&label, "version", &mut || {
        loaded.version = plugin.version().to_owned();
        Ok(())
    })?;
    catch(&label, "protected_tools", &mut || {
        loaded.protected_tools = plugin.protected_tools();
        Ok(())
    })?;
    catch(&label, "template", &mut || {
        loaded.template = plugin.template();
        Ok(())
    })?;
    Ok(loaded)
}

/// A plugin's name goes into reports, log lines and terminals: it must say something, and hold
/// nothing a terminal would act on (a newline forging a log line, an ANSI escape).
fn check_name(plugin: &str, name: &str) -> Result<(), PluginError> {
    let reason = if name.trim().is_empty() {
        "is empty"
    } else if name.chars().any(char::is_control) {
        "holds control characters"
    } else {
        return Ok(());
    };
    Err(PluginError::BadName {
        plugin: plugin.to_owned(),
        name: name.to_owned(),
        reason,
    })
}

/// Calls one table function with a sink that copies every string it is given.
fn call(
    plugin: &str,
    function: &'static str,
    invoke: impl FnOnce(Sink, *mut c_void) -> Status,
) -> Result<Vec<String>, PluginError> {
    extern "C" fn collect(ctx: *mut c_void, text: Str) {
        // SAFETY: `ctx` is the `Vec` below, alive for the whole call; `text` is valid for this call
        // and is copied before returning.
        unsafe {
            let out = &mut *ctx.cast::<Vec<Vec<u8>>>();
            out.push(text.bytes().to_vec());
        }
    }
    let mut received: Vec<Vec<u8>> = Vec::new();
    let status = invoke(collect, (&raw mut received).cast::<c_void>());
    let texts: Vec<String> = received
        .into_iter()
        .map(String::from_utf8)
        .collect::<Result<_, _>>()
        .map_err(|_| PluginError::NotUtf8 {
            plugin: plugin.to_owned(),
            function,
        })?;
    let message = || texts.join("; ");
    match status {
        Status::OK => Ok(texts),
        Status::PANICKED => Err(PluginError::Panicked {
            plugin: plugin.to_owned(),
            function,
            message: message(),
        }),
        Status::ERROR => Err(PluginError::Failed {
            plugin: plugin.to_owned(),
            function,
            message: message(),
        }),
        Status(other) => Err(PluginError::Failed {
            plugin: plugin.to_owned(),
            function,
            message: format!("unknown status {other}"),
        }),
    }
}

fn first(texts: Vec<String>) -> String {
    texts.into_iter().next().unwrap_or_default()
}
