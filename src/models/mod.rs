pub mod diagonal;
pub mod histogram;
pub mod token_select;
