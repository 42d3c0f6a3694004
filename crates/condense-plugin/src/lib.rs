//! The plugin ABI, and the SDK that makes a Rust type a plugin.
//!
//! A plugin is a `cdylib` exporting one versioned C symbol, `condense_plugin_v1`, that returns a
//! pointer to a static [`PluginTable`]. Only plain C data crosses the boundary: borrowed
//! `(ptr, len)` UTF-8 strings going in, strings coming out through a host callback ([`Sink`]) that
//! copies them at once, and a [`Status`] code. Rust types never cross it, so the plugin and the
//! host need not be built by the same compiler.
//!
//! Writing one takes a type that implements [`Plugin`] and one line:
//!
//! ```
//! use condense_plugin::{Plugin, export_plugin};
//!
//! #[derive(Default)]
//! struct Memory {
//!     tools: Vec<String>,
//! }
//!
//! impl Plugin for Memory {
//!     fn name(&self) -> &str { "memory" }
//!     fn version(&self) -> &str { "1.0.0" }
//!     fn configure(&mut self, _config_toml: &str) -> Result<(), String> {
//!         self.tools = vec!["memory_store".into()];
//!         Ok(())
//!     }
//!     fn protected_tools(&self) -> Vec<String> { self.tools.clone() }
//! }
//!
//! export_plugin!(Memory);
//! ```
//!
//! The macro wraps every exported function in `catch_unwind` (a panic becomes
//! [`Status::PANICKED`], never an unwind across the boundary) and refuses to compile under
//! `panic = "abort"`, where a plugin's panic would take the host down.
#![warn(missing_docs)]
#![deny(improper_ctypes_definitions)]

use std::ffi::c_void;

/// The ABI this crate speaks. A host refuses a table with another version.
pub const ABI_VERSION: u32 = 1;

/// The one symbol a plugin exports: `extern "C" fn() -> *const PluginTable`.
pub const SYMBOL: &[u8] = b"condense_plugin_v1";

/// A borrowed UTF-8 string: valid only for the duration of the call it is passed to.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Str {
    /// The first byte.
    pub ptr: *const u8,
    /// The length in bytes.
    pub len: usize,
}

impl Str {
    /// Borrows `text` for the length of a call.
    pub fn new(text: &str) -> Str {
        Str {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }

    /// The bytes, for the side that received the string.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes for the lifetime `'a` (the ABI guarantees it for
    /// the duration of the call that passed the string).
    #[allow(unsafe_code)]
    pub unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees `ptr` points to `len` readable bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// How a call went. A plain integer rather than an enum: a host must be able to read any value a
/// plugin returns, including one this version does not know, without undefined behaviour.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    /// Success.
    pub const OK: Status = Status(0);
    /// The sink received one string: the error message.
    pub const ERROR: Status = Status(1);
    /// The plugin panicked; the sink may have received the panic message.
    pub const PANICKED: Status = Status(2);
}

/// The host's callback for strings coming out of the plugin. It copies the string before it
/// returns; `ctx` is the host's, passed back untouched.
pub type Sink = extern "C" fn(ctx: *mut c_void, text: Str);

/// The fixed header of every table version: read first, so a host can refuse a table of another
/// version or size before it reads anything else.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TableHeader {
    /// The ABI version the plugin was built for.
    pub abi_version: u32,
    /// `size_of::<PluginTable>()` as the plugin was built.
    pub size: usize,
}

/// What `condense_plugin_v1` returns a pointer to. Static: it lives as long as the library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PluginTable {
    /// Version and size, read before anything else.
    pub header: TableHeader,
    /// Writes the plugin's name to the sink.
    pub name: extern "C" fn(sink: Sink, ctx: *mut c_void) -> Status,
    /// Writes the plugin's version to the sink.
    pub version: extern "C" fn(sink: Sink, ctx: *mut c_void) -> Status,
    /// Hands the plugin its `[plugins.config]` table as TOML text.
    pub configure: extern "C" fn(config: Str, sink: Sink, ctx: *mut c_void) -> Status,
    /// Writes each protected tool's name to the sink, one call per tool.
    pub protected_tools: extern "C" fn(sink: Sink, ctx: *mut c_void) -> Status,
    /// Writes the compaction template to the sink, or nothing when the plugin has none.
    pub template: extern "C" fn(sink: Sink, ctx: *mut c_void) -> Status,
}

/// A plugin, in process or behind the ABI. A harness that embeds condense can register one
/// directly; [`export_plugin!`] makes the same type a shared library.
pub trait Plugin: Send {
    /// The plugin's name, as hosts report it.
    fn name(&self) -> &str;
    /// The plugin's version.
    fn version(&self) -> &str;
    /// Called once, before anything else, with the `[plugins.config]` table as TOML text
    /// (empty when there is none).
    fn configure(&mut self, config_toml: &str) -> Result<(), String> {
        let _ = config_toml;
        Ok(())
    }
    /// Tools whose outputs are never pruned or summarized away.
    fn protected_tools(&self) -> Vec<String> {
        Vec::new()
    }
    /// A compaction template (minijinja text with `## ` sections), if the plugin supplies one.
    fn template(&self) -> Option<String> {
        None
    }
}

/// The text a panic was raised with (`panic!("…")`, `expect`, an index out of bounds), or
/// `None` when its payload is not a string. Shared by the SDK's hook, the host's in-process
/// plugins and the CLI's last-resort hook, which all report a panic in one line.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

thread_local! {
    /// The last panic's message and place on this thread, kept by the SDK's panic hook for the
    /// error the host reports.
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A plugin's library carries its own copy of std, and so its own panic hook, whose default
/// prints the panic and a backtrace note on the host's stderr, past the host's `-q`. The SDK
/// replaces it, once, with a hook that prints nothing and keeps the message for [`guard`], which
/// hands it to the host. Only panics inside the plugin's library reach this hook.
fn silence_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message =
                panic_message(info.payload()).unwrap_or_else(|| "the plugin panicked".to_owned());
            let at = info
                .location()
                .map(|l| format!(" (at {}:{})", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(format!("{message}{at}")));
        }));
    });
}

/// Runs `body` with the plugin, turning a panic into [`Status::PANICKED`] and an `Err` into
/// [`Status::ERROR`] with its message sent to the sink. Used by [`export_plugin!`].
#[doc(hidden)]
pub fn guard<P: Plugin>(
    cell: &std::sync::Mutex<P>,
    sink: Sink,
    ctx: *mut c_void,
    body: impl FnOnce(&mut P, &mut dyn FnMut(&str)) -> Result<(), String>,
) -> Status {
    silence_panics();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut plugin = cell
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut send = |text: &str| sink(ctx, Str::new(text));
        body(&mut plugin, &mut send)
    }));
    match outcome {
        Ok(Ok(())) => Status::OK,
        Ok(Err(message)) => {
            sink(ctx, Str::new(&message));
            Status::ERROR
        }
        Err(payload) => {
            let message = LAST_PANIC
                .with(|last| last.borrow_mut().take())
                .or_else(|| panic_message(payload.as_ref()))
                .unwrap_or_else(|| "the plugin panicked".to_owned());
            sink(ctx, Str::new(&message));
            Status::PANICKED
        }
    }
}

/// Exports `$plugin` (a type implementing [`Plugin`] and `Default`) as `condense_plugin_v1`.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(panic = "abort")]
        compile_error!(
            "a condense plugin must be built with panic = \"unwind\": with panic = \"abort\" a panic in the plugin would abort the host"
        );

        const _: () = {
            use ::std::ffi::c_void;
            use ::std::sync::{Mutex, OnceLock};
            use $crate::{PluginTable, Sink, Status, Str, TableHeader, guard};

            static PLUGIN: OnceLock<Mutex<$plugin>> = OnceLock::new();

            fn cell() -> &'static Mutex<$plugin> {
                PLUGIN.get_or_init(|| Mutex::new(<$plugin as Default>::default()))
            }

            extern "C" fn name(sink: Sink, ctx: *mut c_void) -> Status {
                guard(cell(), sink, ctx, |plugin, send| {
                    send($crate::Plugin::name(plugin));
                    Ok(())
                })
            }

            extern "C" fn version(sink: Sink, ctx: *mut c_void) -> Status {
                guard(cell(), sink, ctx, |plugin, send| {
                    send($crate::Plugin::version(plugin));
                    Ok(())
                })
            }

            extern "C" fn configure(config: Str, sink: Sink, ctx: *mut c_void) -> Status {
                guard(cell(), sink, ctx, |plugin, _| {
                    // SAFETY: the host passes a string valid for this call.
                    #[allow(unsafe_code)]
                    let bytes = unsafe { config.bytes() };
                    let text = ::std::str::from_utf8(bytes).map_err(|error| format!("the configuration is not UTF-8: {error}"))?;
                    $crate::Plugin::configure(plugin, text)
                })
            }

            extern "C" fn protected_tools(sink: Sink, ctx: *mut c_void) -> Status {
                guard(cell(), sink, ctx, |plugin, send| {
                    for tool in $crate::Plugin::protected_tools(plugin) {
                        send(&tool);
                    }
                    Ok(())
                })
            }

            extern "C" fn template(sink: Sink, ctx: *mut c_void) -> Status {
                guard(cell(), sink, ctx, |plugin, send| {
                    if let Some(template) = $crate::Plugin::template(plugin) {
                        send(&template);
                    }
                    Ok(())
                })
            }

            static TABLE: PluginTable = PluginTable {
                header: TableHeader { abi_version: $crate::ABI_VERSION, size: ::std::mem::size_of::<PluginTable>() },
                name,
                version,
                configure,
                protected_tools,
                template,
            };

            #[allow(unsafe_code)]
            #[unsafe(no_mangle)]
            pub extern "C" fn condense_plugin_v1() -> *const PluginTable {
                &TABLE
            }
        };
    };
}
