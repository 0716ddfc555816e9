// `sqlx::migrate!` embeds migrations/ at compile time; without this, editing or adding a
// migration would not rebuild the origin (the sqlx documentation recommends this build script).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
