//! The origin's PostgreSQL handle: the same statements on a direct connection and behind a
//! pooler in transaction mode, without call sites branching.
//!
//! Direct ([`DbPooler::None`]): every statement is a named prepared statement cached per
//! connection (sqlx's default), run as the call site wrote it.
//!
//! Behind a transaction pooler ([`DbPooler::Transaction`], PgBouncer `pool_mode =
//! transaction`): a server connection belongs to a client only for one transaction, so
//! - every statement is **unnamed** (sqlx's `persistent(false)`): nothing outlives the
//!   transaction that prepared it, so no `prepared statement "sqlx_s_1" already exists` or
//!   `… does not exist` on a server connection another client prepared on;
//! - a statement with parameters run on the pool gets a `BEGIN` / `COMMIT` around it: sqlx
//!   sends its parse and its execution in two round trips, which the pooler may otherwise hand
//!   to two server connections. A statement without parameters (the simple query protocol, one
//!   round trip) runs as it is;
//! - statements inside a [`Tx`] stay in that transaction, unnamed.
//!
//! The cost (two more round trips for a lone statement) is measured by `bench_origin
//! --pgbouncer-url`; docs/DEPLOY.md "Behind a connection pooler".

use std::ops::{Deref, DerefMut};

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::error::BoxDynError;
use sqlx::postgres::{
    PgArguments, PgConnectOptions, PgQueryResult, PgRow, PgStatement, PgTypeInfo,
};
use sqlx::{Describe, Either, Execute, Executor, PgPool, Postgres, Transaction};

/// What sits between the origin and PostgreSQL (`FLASHGATE_DB_POOLER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DbPooler {
    /// A direct connection (or a pooler in session mode): prepared statements are cached per
    /// connection.
    #[default]
    None,
    /// A pooler in transaction mode: a connection is someone else's between two transactions.
    Transaction,
}

/// A pool of PostgreSQL connections that knows what sits between it and the server. Cheap to
/// clone (a pool handle). `&Db` is an [`Executor`]: `query!(…).fetch_one(&db)`.
#[derive(Debug, Clone)]
pub struct Db {
    pool: PgPool,
    /// Run every statement unnamed (behind a transaction pooler).
    unnamed: bool,
}

/// The connection options of `database_url` (TLS from its `sslmode` / `sslrootcert`
/// parameters) for a pool behind `pooler`. Direct ([`DbPooler::None`]): the
/// `statement_timeout` of `statement_timeout_ms` (0 = none) is set on every connection (a
/// run-time parameter sent at connection start-up). Behind a transaction pooler
/// ([`DbPooler::Transaction`]): no start-up parameter PgBouncer refuses (`options`,
/// `extra_float_digits`); prepared statements stay run unnamed ([`Db`]).
///
/// # Errors
/// A URL that does not parse.
pub fn pg_options(
    database_url: &str,
    pooler: DbPooler,
    statement_timeout_ms: u64,
) -> Result<PgConnectOptions, sqlx::Error> {
    let options = behind(database_url.parse()?, pooler);
    Ok(match pooler {
        DbPooler::None => {
            options.options([("statement_timeout", statement_timeout_ms.to_string())])
        }
        DbPooler::Transaction => options,
    })
}

/// `options` without the start-up parameters a transaction pooler refuses
/// (`extra_float_digits`; `options` is never set here), unchanged on a direct connection.
pub fn behind(options: PgConnectOptions, pooler: DbPooler) -> PgConnectOptions {
    match pooler {
        DbPooler::None => options,
        DbPooler::Transaction => options.extra_float_digits(None),
    }
}

impl Db {
    /// A handle on `pool`, whose connections go through `pooler`.
    pub fn new(pool: PgPool, pooler: DbPooler) -> Self {
        Db {
            pool,
            unnamed: pooler == DbPooler::Transaction,
        }
    }

    /// The pool itself, for what is not a statement (`COPY … FROM STDIN`, closing). A
    /// statement run on it directly is named: use `&Db` for statements.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Starts a transaction. Errors: no connection within the pool's acquire timeout, or
    /// `BEGIN` refused.
    pub async fn begin(&self) -> sqlx::Result<Tx<'static>> {
        Ok(Tx {
            conn: Conn {
                tx: self.pool.begin().await?,
                unnamed: self.unnamed,
            },
        })
    }

    /// Closes every connection of the pool.
    pub async fn close(&self) {
        self.pool.close().await
    }
}

impl From<PgPool> for Db {
    /// A direct connection's handle (named, cached statements).
    fn from(pool: PgPool) -> Self {
        Db::new(pool, DbPooler::None)
    }
}

/// A transaction of a [`Db`]: `&mut *tx` is an [`Executor`] (a [`Conn`]); rolled back when
/// dropped without [`Tx::commit`].
#[derive(Debug)]
pub struct Tx<'a> {
    conn: Conn<'a>,
}

/// The connection of a [`Tx`], where its statements run (unnamed behind a transaction
/// pooler). Functions that run inside a caller's transaction take `&mut Conn<'_>`.
#[derive(Debug)]
pub struct Conn<'a> {
    tx: Transaction<'a, Postgres>,
    unnamed: bool,
}

impl<'a> Tx<'a> {
    /// Commits. Errors: the server refused the `COMMIT` (the transaction is then gone).
    pub async fn commit(self) -> sqlx::Result<()> {
        self.conn.tx.commit().await
    }

    /// Rolls back.
    pub async fn rollback(self) -> sqlx::Result<()> {
        self.conn.tx.rollback().await
    }

    /// A savepoint inside this transaction, itself a [`Tx`] (committing it releases the
    /// savepoint; dropping it rolls back to it).
    pub async fn savepoint(&mut self) -> sqlx::Result<Tx<'_>> {
        let unnamed = self.conn.unnamed;
        Ok(Tx {
            conn: Conn {
                tx: sqlx::Acquire::begin(&mut *self.conn.tx).await?,
                unnamed,
            },
        })
    }

    /// The raw connection, for what is not a statement (`COPY … FROM STDIN`). A statement run
    /// on it directly is named: use `&mut *tx` for statements.
    pub fn raw(&mut self) -> &mut sqlx::PgConnection {
        &mut self.conn.tx
    }
}

impl<'a> Deref for Tx<'a> {
    type Target = Conn<'a>;
    fn deref(&self) -> &Conn<'a> {
        &self.conn
    }
}

impl DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

/// A statement with its arguments taken out, run unnamed.
struct Unnamed<'q> {
    sql: &'q str,
    arguments: Option<PgArguments>,
}

impl<'q> Unnamed<'q> {
    /// Takes `query`'s SQL and arguments. Errors: an argument that failed to encode.
    fn take(mut query: impl Execute<'q, Postgres>) -> sqlx::Result<Self> {
        let arguments = query.take_arguments().map_err(sqlx::Error::Encode)?;
        Ok(Unnamed {
            sql: query.sql(),
            arguments,
        })
    }
}

impl<'q> Execute<'q, Postgres> for Unnamed<'q> {
    fn sql(&self) -> &'q str {
        self.sql
    }
    fn statement(&self) -> Option<&PgStatement<'q>> {
        None
    }
    fn take_arguments(&mut self) -> Result<Option<PgArguments>, BoxDynError> {
        Ok(self.arguments.take())
    }
    fn persistent(&self) -> bool {
        false
    }
}

/// A statement as a transaction's connection sends it: as given, or unnamed behind a
/// transaction pooler.
enum Sent<'q, E> {
    Given(E),
    Unnamed(Unnamed<'q>),
}

impl<'q, E: Execute<'q, Postgres>> Sent<'q, E> {
    /// `query` as given, or unnamed when `unnamed`. Errors: an argument that failed to encode.
    fn new(unnamed: bool, query: E) -> sqlx::Result<Self> {
        if unnamed {
            Unnamed::take(query).map(Sent::Unnamed)
        } else {
            Ok(Sent::Given(query))
        }
    }
}

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Sent<'q, E> {
    fn sql(&self) -> &'q str {
        match self {
            Sent::Given(q) => q.sql(),
            Sent::Unnamed(q) => q.sql(),
        }
    }
    fn statement(&self) -> Option<&PgStatement<'q>> {
        match self {
            Sent::Given(q) => q.statement(),
            Sent::Unnamed(q) => q.statement(),
        }
    }
    fn take_arguments(&mut self) -> Result<Option<PgArguments>, BoxDynError> {
        match self {
            Sent::Given(q) => q.take_arguments(),
            Sent::Unnamed(q) => q.take_arguments(),
        }
    }
    fn persistent(&self) -> bool {
        match self {
            Sent::Given(q) => q.persistent(),
            Sent::Unnamed(q) => q.persistent(),
        }
    }
}

/// The error of [`Executor::prepare_with`] behind a transaction pooler.
fn not_kept() -> sqlx::Error {
    sqlx::Error::Configuration(
        "a prepared statement does not survive a transaction pooler (FLASHGATE_DB_POOLER=transaction)"
            .into(),
    )
}

type Item = Result<Either<PgQueryResult, PgRow>, sqlx::Error>;

/// `prepare_with` and `describe` of the two [`Executor`] impls below, both run on `$inner` (an
/// expression of the receiver `$this`): a prepare is refused when statements are unnamed (a
/// pooler in transaction mode keeps no prepared statement between transactions), a describe
/// is `$inner`'s.
macro_rules! prepare_and_describe_on {
    ($c:lifetime, $this:ident => $inner:expr) => {
        fn prepare_with<'e, 'q: 'e>(
            $this,
            sql: &'q str,
            parameters: &'e [PgTypeInfo],
        ) -> BoxFuture<'e, sqlx::Result<PgStatement<'q>>>
        where
            $c: 'e,
        {
            if $this.unnamed {
                return Box::pin(async { Err(not_kept()) });
            }
            ($inner).prepare_with(sql, parameters)
        }

        fn describe<'e, 'q: 'e>(
            $this,
            sql: &'q str,
        ) -> BoxFuture<'e, sqlx::Result<Describe<Postgres>>>
        where
            $c: 'e,
        {
            ($inner).describe(sql)
        }
    };
}

// Like sqlx's `&Pool`: an executor for any lifetime `'c`, whatever the borrow's; what outlives
// the call holds a clone of the pool (a handle), not the borrow.
impl<'c> Executor<'c> for &'_ Db {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.unnamed {
            return self.pool.fetch_many(query);
        }
        let query = match Unnamed::take(query) {
            Ok(q) => q,
            Err(e) => return stream::once(async { Err(e) }).boxed(),
        };
        if query.arguments.is_none() {
            return self.pool.fetch_many(query);
        }
        let pool = self.pool.clone();
        stream::once(async move {
            let mut tx = pool.begin().await?;
            let items: Vec<Either<PgQueryResult, PgRow>> =
                (&mut *tx).fetch_many(query).try_collect().await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(items)
        })
        .flat_map(|r| {
            let items: Vec<Item> = match r {
                Ok(items) => items.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            stream::iter(items)
        })
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, sqlx::Result<Option<PgRow>>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.unnamed {
            return self.pool.fetch_optional(query);
        }
        let pool = self.pool.clone();
        Box::pin(async move {
            let query = Unnamed::take(query)?;
            if query.arguments.is_none() {
                return pool.fetch_optional(query).await;
            }
            let mut tx = pool.begin().await?;
            let row = (&mut *tx).fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    prepare_and_describe_on!('c, self => &self.pool);
}

impl<'c> Executor<'c> for &'c mut Conn<'_> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match Sent::new(self.unnamed, query) {
            Ok(q) => (&mut *self.tx).fetch_many(q),
            Err(e) => stream::once(async { Err(e) }).boxed(),
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, sqlx::Result<Option<PgRow>>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match Sent::new(self.unnamed, query) {
            Ok(q) => (&mut *self.tx).fetch_optional(q),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }

    prepare_and_describe_on!('c, self => &mut *self.tx);
}
