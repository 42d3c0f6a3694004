pub struct OpenAi;
pub struct Anthropic;
pub struct RemoteSettings;
