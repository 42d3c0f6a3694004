//! The TOML configuration loader: any file either loads or gives an error, never a panic; a
//! configuration that loads gives settings the pipeline accepts.
#![no_main]

use condense_host::{Compactor, Config, Sources};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("condense-fuzz-{}.toml", std::process::id()));
    std::fs::write(&path, data).expect("the scratch file is writable");
    let sources = Sources {
        explicit: Some(path),
        ..Sources::default()
    };
    if let Ok(config) = Config::load(&sources) {
        let _ = config.show();
        // Plugins would load libraries named by the input: not this target's business.
        if config.plugins.is_empty() && config.template_file().is_none() {
            let _ = Compactor::from_config(&config);
        }
    }
});
