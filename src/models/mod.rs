pub mod diagonal;
pub mod histogram;
pub mod kq;
pub mod prompt;
pub mod token_select;
