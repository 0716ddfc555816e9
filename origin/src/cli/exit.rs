//! The exit codes of the `flashgate` command: one meaning each, the same for every subcommand
//! (docs/ADMIN.md, "Exit codes"). An expected error prints one line `error: …` on stderr, never a
//! backtrace.

/// Done.
pub const OK: i32 = 0;
/// Checked, and found a fault (`flashgate reconcile`).
pub const FAULT: i32 = 1;
/// The command line is wrong (clap's own usage errors exit 2 too), or the credentials are
/// missing or refused (401 / 403).
pub const USAGE: i32 = 2;
/// What the command names does not exist (404: an unknown campaign, code or claim).
pub const NOT_FOUND: i32 = 3;
/// The origin refused the request as it stands (409, 422, another 4xx).
pub const REFUSED: i32 = 4;
/// The origin, PostgreSQL or Redis could not be reached, or answered 5xx.
pub const UNREACHABLE: i32 = 5;

/// The exit code of a refused HTTP call with `status`.
pub fn for_status(status: u16) -> i32 {
    match status {
        401 | 403 => USAGE,
        404 => NOT_FOUND,
        500.. => UNREACHABLE,
        _ => REFUSED,
    }
}

/// The exit code of a failed command: [`UNREACHABLE`] when a connection or a service failed
/// (PostgreSQL, Redis, the network), else [`USAGE`] (a setting or an argument is wrong).
pub fn for_error(e: &anyhow::Error) -> i32 {
    let service = e
        .chain()
        .any(|c| c.is::<sqlx::Error>() || c.is::<redis::RedisError>() || c.is::<std::io::Error>());
    if service {
        UNREACHABLE
    } else {
        USAGE
    }
}

/// Writes `text` and a newline to stdout. A closed stdout (`| head`) is not an error of the
/// command; any other write error is (a full disk: [`UNREACHABLE`] through [`for_error`]).
pub fn print_line(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

/// [`print_line`] for a command that returns its exit code: [`OK`], or [`UNREACHABLE`] after
/// one `error: …` line when stdout cannot be written.
pub fn print_or_code(text: &str) -> i32 {
    match print_line(text) {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            UNREACHABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_own_code() {
        let codes = [FAULT, USAGE, NOT_FOUND, REFUSED, UNREACHABLE];
        let mut distinct = codes.to_vec();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), codes.len());
        assert!(!codes.contains(&OK));
        assert_eq!(
            [401, 403, 404, 409, 422, 400, 503].map(for_status),
            [
                USAGE,
                USAGE,
                NOT_FOUND,
                REFUSED,
                REFUSED,
                REFUSED,
                UNREACHABLE
            ]
        );
        let io = anyhow::Error::from(std::io::Error::other("refused")).context("connecting");
        assert_eq!(for_error(&io), UNREACHABLE);
        assert_eq!(for_error(&anyhow::anyhow!("bad key file")), USAGE);
    }
}
