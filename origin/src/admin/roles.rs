//! Admin tokens: several, each with a name and a role, from configuration.
//!
//! Format of `FLASHGATE_ADMIN_TOKENS`: comma-separated entries `name:role:token`, e.g.
//! `alice:manager:3f9a…,bob:viewer:77c1…`.
//! - `name`: 1..=64 of `[A-Za-z0-9_.-]`; shown in the audit trail, never the token;
//! - `role`: `manager` (reads and writes) or `viewer` (reads only);
//! - `token`: the rest of the entry (it may contain `:`), 1..=512 visible ASCII characters
//!   without `,`. Use 32 random bytes in hex or more.
//!
//! The older `FLASHGATE_ADMIN_TOKEN` still works: it is a manager token named `admin`.
//! Names and tokens must be unique. Tokens are compared in constant time (SHA-256 digests
//! compared with `subtle`, every configured token each time) and never logged.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secret::Secret;

/// What an admin token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads only: lists, shows, audit trails.
    Viewer,
    /// Everything a viewer may, plus every write (create, pause, resume, close, restock, …).
    Manager,
}

impl Role {
    /// The configuration / wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Manager => "manager",
        }
    }

    /// True when a token of this role may do what `needed` requires.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "manager" => Ok(Role::Manager),
            other => Err(format!(
                "unknown role '{other}' (expected manager or viewer)"
            )),
        }
    }
}

/// The name given to `FLASHGATE_ADMIN_TOKEN` (a manager token).
pub const LEGACY_TOKEN_NAME: &str = "admin";

/// One configured admin token.
#[derive(Clone)]
pub struct AdminToken {
    /// Who holds it (audit trail name).
    pub name: String,
    pub role: Role,
    pub token: Secret,
    digest: [u8; 32],
}

impl AdminToken {
    /// A token entry; see the module documentation for the rules (checked by
    /// [`AdminTokens::from_str`], not here).
    pub fn new(name: &str, role: Role, token: Secret) -> Self {
        let digest = Sha256::digest(token.expose().as_bytes()).into();
        AdminToken {
            name: name.to_string(),
            role,
            token,
            digest,
        }
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:[redacted]", self.name, self.role.as_str())
    }
}

/// The configured admin tokens (`FLASHGATE_ADMIN_TOKENS`). `Debug` never shows a token.
#[derive(Clone, Debug, Default)]
pub struct AdminTokens(Vec<AdminToken>);

/// Who called: the name and role of the admin token presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    /// The token's name, as written to the audit trail.
    pub name: String,
    pub role: Role,
}

fn valid_name(s: &str) -> bool {
    flashgate_shared::text::is_ascii_of(s, 64, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
    })
}

fn valid_token(s: &str) -> bool {
    flashgate_shared::text::is_visible_ascii(s, 512) && !s.contains(',')
}

impl AdminTokens {
    /// No tokens.
    pub fn new() -> Self {
        AdminTokens(Vec::new())
    }

    /// Adds a token, checking the name and token rules and uniqueness.
    pub fn push(&mut self, entry: AdminToken) -> Result<(), String> {
        if !valid_name(&entry.name) {
            return Err(format!(
                "admin token name '{}' must be 1..=64 of [A-Za-z0-9_.-]",
                entry.name
            ));
        }
        if !valid_token(entry.token.expose()) {
            return Err(format!(
                "admin token of '{}' must be 1..=512 visible ASCII characters without ','",
                entry.name
            ));
        }
        if self.0.iter().any(|t| t.name == entry.name) {
            return Err(format!("admin token name '{}' is used twice", entry.name));
        }
        if self.0.iter().any(|t| t.digest == entry.digest) {
            return Err(format!(
                "admin token of '{}' is the same as another one",
                entry.name
            ));
        }
        self.0.push(entry);
        Ok(())
    }

    /// The configured entries.
    pub fn entries(&self) -> &[AdminToken] {
        &self.0
    }

    /// True when no token is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entry whose token equals `given`. Every entry is compared, in constant time, so the
    /// time taken tells nothing about which (or whether one) matched.
    pub fn find(&self, given: &str) -> Option<Admin> {
        let digest: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        let mut found = None;
        for t in &self.0 {
            let hit: bool = t.digest.ct_eq(&digest).into();
            if hit && found.is_none() {
                found = Some(Admin {
                    name: t.name.clone(),
                    role: t.role,
                });
            }
        }
        found
    }
}

impl FromStr for AdminTokens {
    type Err = String;
    /// Parses `name:role:token[,name:role:token…]`. Error messages name the entry, never the
    /// token.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = AdminTokens::new();
        for (i, entry) in s.split(',').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(role), Some(token)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!(
                    "admin token entry {} must be name:role:token",
                    i + 1
                ));
            };
            let role: Role = role.parse()?;
            out.push(AdminToken::new(name, role, Secret::new(token)))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_roles_and_tokens() {
        let t: AdminTokens = "alice:manager:tok-a:with:colons, bob:viewer:tok-b"
            .parse()
            .unwrap();
        assert_eq!(
            t.find("tok-a:with:colons"),
            Some(Admin {
                name: "alice".into(),
                role: Role::Manager
            })
        );
        assert_eq!(t.find("tok-b").unwrap().role, Role::Viewer);
        assert_eq!(t.find("tok-c"), None);
        assert_eq!(t.find(""), None);
        assert!(!format!("{t:?}").contains("tok-a"));
    }

    #[test]
    fn refuses_bad_entries() {
        assert!("alice:manager".parse::<AdminTokens>().is_err());
        assert!("alice:owner:x".parse::<AdminTokens>().is_err());
        assert!("al ice:manager:x".parse::<AdminTokens>().is_err());
        assert!("a:manager:x,a:viewer:y".parse::<AdminTokens>().is_err());
        assert!("a:manager:x,b:viewer:x".parse::<AdminTokens>().is_err());
        assert!("a:manager:".parse::<AdminTokens>().is_err());
        let err = "a:manager:secret1,b:viewer:secret1"
            .parse::<AdminTokens>()
            .unwrap_err();
        assert!(!err.contains("secret1"));
        assert!("".parse::<AdminTokens>().unwrap().is_empty());
    }

    #[test]
    fn managers_may_read_viewers_may_not_write() {
        assert!(Role::Manager.allows(Role::Viewer));
        assert!(Role::Manager.allows(Role::Manager));
        assert!(Role::Viewer.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Manager));
    }
}
