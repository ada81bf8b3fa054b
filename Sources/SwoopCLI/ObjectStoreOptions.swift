import ArgumentParser
import Swoop

/// The options of every object store whose names the commands take (`s3://`), one group each: a
/// new store's options are a line here.
struct ObjectStoreOptions: ParsableArguments {
    @OptionGroup(title: "Object stores (s3://)") var s3: S3Options

    func apply(to configuration: inout Downloader.Configuration) {
        s3.apply(to: &configuration)
    }
}
