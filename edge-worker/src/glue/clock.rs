//! The worker's clock: every time the worker reads goes through [`now_ms`], the runtime's
//! wall clock shifted by the isolate's `FLASHGATE_TEST_CLOCK_OFFSET_MS`
//! ([`crate::config::EdgeConfig::clock_ms`]; 0 unless that fault-injection setting is set).

use crate::config::EdgeConfig;
use std::cell::RefCell;
use std::rc::Rc;
use worker::js_sys;

thread_local! {
    /// The settings whose offset [`now_ms`] applies; `None` until the isolate has read them.
    static SETTINGS: RefCell<Option<Rc<EdgeConfig>>> = const { RefCell::new(None) };
}

/// Makes [`now_ms`] apply `cfg`'s clock offset (called once the isolate has read its
/// settings); logs a warning when that offset is not 0.
pub(super) fn use_settings(cfg: Rc<EdgeConfig>) {
    if cfg.test_clock_offset_ms != 0 {
        worker::console_warn!(
            "flashgate edge: clock shifted by {} ms (FLASHGATE_TEST_CLOCK_OFFSET_MS, fault injection only)",
            cfg.test_clock_offset_ms
        );
    }
    SETTINGS.with(|s| *s.borrow_mut() = Some(cfg));
}

/// Now on the worker's clock, ms since the Unix epoch.
pub(super) fn now_ms() -> i64 {
    // `js_sys::Date::now()`: no `Date` object is made (worker's `Date::now()` makes one per
    // read, and the claim path reads the clock several times).
    let wall_ms = js_sys::Date::now() as i64;
    SETTINGS.with(|s| s.borrow().as_ref().map_or(wall_ms, |c| c.clock_ms(wall_ms)))
}
