fn main() {
    std::process::exit(infertop::cli::main());
}
