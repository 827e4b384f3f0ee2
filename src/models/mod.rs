pub mod diagonal;
pub mod histogram;
