//! Plugins that break the rules, one defect per feature, so the host's tests can show that each
//! gives a clear error and never takes the host down. Built by those tests; never shipped.
#![allow(unsafe_code)]
#![cfg_attr(feature = "panics", allow(dead_code))]

use std::ffi::c_void;

use condense_plugin::{ABI_VERSION, PluginTable, Sink, Status, Str, TableHeader};

extern "C" fn name(sink: Sink, ctx: *mut c_void) -> Status {
    if cfg!(feature = "bad-utf8") {
        const NOT_UTF8: [u8; 4] = [0x62, 0xFF, 0xFE, 0x6B];
        sink(
            ctx,
            Str {
                ptr: NOT_UTF8.as_ptr(),
                len: NOT_UTF8.len(),
            },
        );
    } else {
        sink(ctx, Str::new("broken"));
    }
    Status::OK
}

extern "C" fn version(sink: Sink, ctx: *mut c_void) -> Status {
    sink(ctx, Str::new("0.0.0"));
    Status::OK
}

extern "C" fn configure(_config: Str, _sink: Sink, _ctx: *mut c_void) -> Status {
    Status::OK
}

extern "C" fn protected_tools(sink: Sink, ctx: *mut c_void) -> Status {
    sink(ctx, Str::new("broken_tool"));
    Status::OK
}

extern "C" fn template(_sink: Sink, _ctx: *mut c_void) -> Status {
    Status::OK
}

static TABLE: PluginTable = PluginTable {
    header: TableHeader {
        abi_version: if cfg!(feature = "wrong-abi") {
            ABI_VERSION + 98
        } else {
            ABI_VERSION
        },
        size: if cfg!(feature = "small-table") {
            std::mem::size_of::<TableHeader>()
        } else {
            std::mem::size_of::<PluginTable>()
        },
    },
    name,
    version,
    configure,
    protected_tools,
    template,
};

#[cfg(not(any(feature = "no-symbol", feature = "panics")))]
#[unsafe(no_mangle)]
pub extern "C" fn condense_plugin_v1() -> *const PluginTable {
    &TABLE
}

#[cfg(feature = "no-symbol")]
#[unsafe(no_mangle)]
pub extern "C" fn condense_plugin_v0() -> *const PluginTable {
    &TABLE
}

/// A plugin written with the SDK whose function really panics: the SDK's guard must turn that
/// into `Status::Panicked` for the host.
#[cfg(feature = "panics")]
mod panicking {
    use condense_plugin::{Plugin, export_plugin};

    #[derive(Default)]
    pub struct Panicky;

    impl Plugin for Panicky {
        fn name(&self) -> &str {
            "panicky"
        }

        fn version(&self) -> &str {
            "0.0.0"
        }

        fn protected_tools(&self) -> Vec<String> {
            let tools: Vec<String> = Vec::new();
            vec![tools[3].clone()]
        }
    }

    export_plugin!(Panicky);
}
