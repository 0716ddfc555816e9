//! Which receiver URLs are allowed: `https://` to a public address. Plain `http://`, and a host
//! that is or resolves to a loopback, private, link-local (cloud metadata at 169.254.169.254
//! included), unique-local, shared (100.64.0.0/10) or unspecified address, are refused unless
//! the operator allows them (`FLASHGATE_WEBHOOK_ALLOW_PRIVATE`, for tests and on-premise
//! setups). The relay checks again before every call, so a name that later resolves to a
//! private address is not called.

use std::net::IpAddr;

use reqwest::Url;

/// Longest URL accepted.
pub const MAX_URL_CHARS: usize = 2_000;

/// Why a URL is refused (the message of the 422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("url is not an absolute URL")]
    Malformed,
    #[error("url must be https://")]
    NotHttps,
    #[error("url must not carry a user or password")]
    Credentials,
    #[error("url's host does not resolve")]
    Unresolved,
    #[error("url's host is or resolves to a loopback, private, link-local or metadata address")]
    Private,
}

/// True for an address a receiver may not have unless private ones are allowed.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
        }
    }
}

/// The checks that need no lookup: an absolute `https://` URL (or `http://` when
/// `allow_private`), no credentials, at most [`MAX_URL_CHARS`].
pub fn parse(url: &str, allow_private: bool) -> Result<Url, UrlError> {
    if url.len() > MAX_URL_CHARS {
        return Err(UrlError::Malformed);
    }
    let u = Url::parse(url).map_err(|_| UrlError::Malformed)?;
    match u.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err(UrlError::NotHttps),
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::Malformed);
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlError::Credentials);
    }
    Ok(u)
}

/// [`parse`], then the host's addresses: refused when one is private (see the module
/// documentation), unless `allow_private`.
pub async fn check(url: &str, allow_private: bool) -> Result<Url, UrlError> {
    let u = parse(url, allow_private)?;
    if allow_private {
        return Ok(u);
    }
    let host = u.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = u.port_or_known_default().unwrap_or(443);
    let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| UrlError::Unresolved)?
            .map(|a| a.ip())
            .collect(),
    };
    if addrs.is_empty() {
        return Err(UrlError::Unresolved);
    }
    if addrs.into_iter().any(is_private) {
        return Err(UrlError::Private);
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_link_local_and_metadata_addresses_are_private() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn http_and_private_hosts_are_refused_unless_allowed() {
        assert_eq!(
            check("http://example.com/h", false).await,
            Err(UrlError::NotHttps)
        );
        assert_eq!(
            check("ftp://example.com/h", true).await,
            Err(UrlError::NotHttps)
        );
        assert_eq!(
            check("https://127.0.0.1/h", false).await,
            Err(UrlError::Private)
        );
        assert_eq!(
            check("https://[::1]:8443/h", false).await,
            Err(UrlError::Private)
        );
        assert_eq!(
            check("https://169.254.169.254/", false).await,
            Err(UrlError::Private)
        );
        assert_eq!(
            check("https://localhost/h", false).await,
            Err(UrlError::Private)
        );
        assert_eq!(
            check("https://u:p@93.184.216.34/", false).await,
            Err(UrlError::Credentials)
        );
        assert_eq!(check("not a url", false).await, Err(UrlError::Malformed));
        assert!(check("https://93.184.216.34/h", false).await.is_ok());
        assert!(check("http://127.0.0.1:9/h", true).await.is_ok());
    }
}
