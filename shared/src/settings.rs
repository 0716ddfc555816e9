//! Settings built from their clap declarations alone (feature `clap`): a default is written
//! once, in its `#[arg(default_value…)]`, and the test and tool configurations take it from
//! there instead of restating it.

/// The settings `T` as clap builds them from `args` (flags only, no program name), every
/// flag not in `args` at its declared default. Environment variables are not read, so the
/// result is the same on every machine whatever its `FLASHGATE_*` variables say.
///
/// Errors: clap's, when `args` do not parse or a required flag is missing.
pub fn from_declarations<T>(args: &[&str]) -> Result<T, clap::Error>
where
    T: clap::Args + clap::FromArgMatches,
{
    let command = T::augment_args(clap::Command::new("settings").no_binary_name(true))
        .mut_args(|arg| arg.env(None));
    T::from_arg_matches(&command.try_get_matches_from(args)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Args)]
    struct Example {
        #[arg(
            long,
            env = "FLASHGATE_SHARED_SETTINGS_TEST_WAIT_MS",
            default_value_t = 250
        )]
        wait_ms: u64,
        #[arg(long, env = "FLASHGATE_SHARED_SETTINGS_TEST_URL")]
        url: String,
    }

    #[test]
    fn defaults_come_from_the_declaration_and_never_from_the_environment() {
        // Only this test reads these variables.
        std::env::set_var("FLASHGATE_SHARED_SETTINGS_TEST_WAIT_MS", "9");
        std::env::set_var("FLASHGATE_SHARED_SETTINGS_TEST_URL", "from-env");
        let e: Example = from_declarations(&["--url", "given"]).unwrap();
        assert_eq!((e.wait_ms, e.url.as_str()), (250, "given"));
        let e: Example = from_declarations(&["--url", "u", "--wait-ms", "7"]).unwrap();
        assert_eq!(e.wait_ms, 7);
        // A required flag is not filled from the environment either.
        let missing = from_declarations::<Example>(&[]).unwrap_err();
        assert_eq!(
            missing.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
    }
}
